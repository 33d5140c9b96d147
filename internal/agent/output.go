package agent

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"sync"
	"syscall"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// madvHugepage is MADV_HUGEPAGE from <linux/mman.h>.
const madvHugepage = 14

// Stream indexes of an output.
const (
	streamStdout = 0
	streamStderr = 1
)

// Sizes of the output store.
const (
	// firstBlock is the size of a stream's first storage block; each next
	// block doubles, up to maxBlock, so small outputs stay small and large
	// ones are read with large pipe reads.
	firstBlock = 4 << 10
	maxBlock   = 8 << 20
	// hugeBlock is the block size from which blocks ask for transparent
	// huge pages: fresh memory is what storing output costs most (page
	// faults), and 2 MiB pages make far fewer of them.
	hugeBlock = 4 << 20
	// discardBuf is the read size once a stream's cap is reached.
	discardBuf = 256 << 10
)

// output keeps a background job's stdout and stderr in memory, up to a cap
// per stream, and remembers the order in which their bytes arrived. Bytes
// beyond the cap are counted and dropped.
//
// Stored bytes never change once published (kept grew over them), so
// readers copy them without holding mu; only the bookkeeping is under mu.
type output struct {
	mu      sync.Mutex
	streams [2]streamStore
	// marks records the arrival order: marks[i] holds the kept sizes of
	// stdout and stderr at the end of segment i. Consecutive bytes of one
	// stream form one segment, so a segment advances one stream only —
	// until the list outgrows maxMarks and is thinned (see publish), after
	// which a segment may advance both (stdout is then sent first).
	marks    [][2]int64
	last     int // stream of the last segment, -1 when it may hold both
	maxMarks int
	watchers map[chan struct{}]struct{}
	closed   bool // no more bytes will come (producers are done)

	// Released output: released[s] is the offset below which the service
	// has stored stream s (see release). Whole blocks below it and below
	// every open reader's position are dropped and their memory reused for
	// new output, so a long job does not fill the sandbox's memory and new
	// output does not pay for fresh pages.
	released [2]int64
	readers  map[*cursor]struct{} // positions of open stream readers
	free     [][]byte             // dropped blocks, for reuse by grow
	fresh    int                  // blocks allocated, not reused (for tests)
}

// maxFreeBlocks bounds the dropped blocks an output keeps for reuse.
const maxFreeBlocks = 4

// streamStore is one stream's storage: append-only blocks, each full except
// the last, block i holding the bytes from starts[i].
type streamStore struct {
	max       int64
	blocks    [][]byte // len == cap; bytes at or beyond kept are not yet valid
	starts    []int64
	alloc     int64 // sum of block sizes
	kept      int64 // valid bytes
	total     int64 // produced, kept or not
	truncated bool
	live      int   // blocks[:live] were dropped (released); they are nil
	dropped   int64 // bytes of the dropped blocks
}

func newOutput(maxStdout, maxStderr int64) *output {
	o := &output{last: -1, watchers: make(map[chan struct{}]struct{}), readers: make(map[*cursor]struct{})}
	o.streams[streamStdout].max = maxStdout
	o.streams[streamStderr].max = maxStderr
	// Thin the order index when segments average under 256 bytes, so its
	// memory stays a small fraction of the caps whatever the job does.
	o.maxMarks = 1024 + int((maxStdout+maxStderr)/256)
	return o
}

// grow returns a new empty block for stream s, or nil when the cap is
// fully allocated.
func (o *output) grow(s int) []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := &o.streams[s]
	size := int64(firstBlock)
	if n := len(st.blocks); n > 0 {
		size = min(int64(len(st.blocks[n-1]))*2, maxBlock)
	}
	size = min(size, st.max-st.alloc)
	if size <= 0 {
		return nil
	}
	var b []byte
	for i, f := range o.free {
		if int64(cap(f)) >= size {
			b = f[:size:size]
			o.free = slices.Delete(o.free, i, i+1)
			break
		}
	}
	if b == nil {
		o.fresh++
		b = make([]byte, size)
		if size >= hugeBlock {
			// Best effort; the Go runtime leaves heap pages' THP flags alone.
			syscall.Madvise(b, madvHugepage)
		}
	}
	st.blocks = append(st.blocks, b)
	st.starts = append(st.starts, st.alloc)
	st.alloc += size
	return b
}

// publish makes n more bytes of stream s valid (kept) and wakes readers.
func (o *output) publish(s int, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := &o.streams[s]
	st.kept += int64(n)
	st.total += int64(n)
	if o.last == s {
		o.marks[len(o.marks)-1][s] = st.kept
	} else {
		var m [2]int64
		if k := len(o.marks); k > 0 {
			m = o.marks[k-1]
		}
		m[s] = st.kept
		o.marks = append(o.marks, m)
		o.last = s
		if len(o.marks) > o.maxMarks {
			o.thin()
		}
	}
	o.wake()
}

// thin halves the order index by dropping every other mark: per-stream
// offsets stay exact, only the interleaving becomes coarser. The last mark
// is kept.
func (o *output) thin() {
	n := len(o.marks)
	j := 0
	for i := 1; i < n; i += 2 {
		o.marks[j] = o.marks[i]
		j++
	}
	if n%2 == 1 {
		o.marks[j] = o.marks[n-1]
		j++
	}
	o.marks = o.marks[:j]
	o.last = -1
}

// drop counts n bytes of stream s that are beyond the cap.
func (o *output) drop(s int, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := &o.streams[s]
	st.total += int64(n)
	if !st.truncated {
		st.truncated = true
		o.wake()
	}
}

// close marks the output complete and trims the unused tail of the last
// blocks, so a finished job holds no more than it kept.
func (o *output) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	for s := range o.streams {
		st := &o.streams[s]
		n := len(st.blocks)
		if n == 0 || st.live >= n {
			continue
		}
		used := st.kept - st.starts[n-1]
		if int64(len(st.blocks[n-1]))-used < 4<<10 {
			continue
		}
		// Readers may hold the old slices: replace, never modify.
		blocks := append([][]byte(nil), st.blocks...)
		blocks[n-1] = append([]byte(nil), st.blocks[n-1][:used]...)
		st.blocks = blocks
		st.alloc = st.kept
	}
	o.wake()
}

// addReader registers a stream reader starting at c; it fails when the
// output before c was already dropped. Remove it with dropReader.
func (o *output) addReader(c cursor) (*cursor, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for s := range o.streams {
		if end := o.streams[s].droppedEnd(); c[s] < end {
			return nil, fmt.Errorf("%s before offset %d was released once the service stored it: %w",
				streamName(s), end, errdefs.ErrFailedPrecondition)
		}
	}
	rp := new(cursor)
	*rp = c
	o.readers[rp] = struct{}{}
	return rp, nil
}

// droppedEnd is the offset where the kept blocks start.
func (st *streamStore) droppedEnd() int64 {
	if st.live == 0 {
		return 0
	}
	return st.starts[st.live]
}

func streamName(s int) string {
	if s == streamStderr {
		return "stderr"
	}
	return "stdout"
}

// advance records that the reader rp no longer reads output before c.
func (o *output) advance(rp *cursor, c cursor) {
	o.mu.Lock()
	defer o.mu.Unlock()
	*rp = c
	o.reclaim()
}

func (o *output) dropReader(rp *cursor) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.readers, rp)
	o.reclaim()
}

// release records that the output before c is stored elsewhere and may be
// dropped once no reader needs it.
func (o *output) release(c cursor) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for s := range o.streams {
		o.released[s] = max(o.released[s], min(c[s], o.streams[s].kept))
	}
	o.reclaim()
}

// reclaim drops the whole blocks below the released offsets and below
// every reader, keeping a few for reuse. Called with mu held.
func (o *output) reclaim() {
	for s := range o.streams {
		low := o.released[s]
		for rp := range o.readers {
			low = min(low, rp[s])
		}
		st := &o.streams[s]
		for st.live < len(st.blocks) && st.live+1 < len(st.starts) && st.starts[st.live+1] <= low {
			b := st.blocks[st.live]
			// Readers may hold the slice of blocks: clear the element,
			// never reslice, so later readers see the block gone.
			st.blocks[st.live] = nil
			st.dropped += int64(len(b))
			st.live++
			o.keepFree(b)
		}
	}
}

// keepFree keeps a dropped block for reuse by grow. The largest blocks are
// kept: a stream's first blocks are small, and keeping them (as the first
// ones dropped) left no room for the full-size blocks a bulk stream asks
// for, so each of those was fresh memory, which the kernel zeroes page by
// page as the pipe reads touch it. Called with mu held.
func (o *output) keepFree(b []byte) {
	if len(o.free) < maxFreeBlocks {
		o.free = append(o.free, b)
		return
	}
	small := 0
	for i, f := range o.free {
		if cap(f) < cap(o.free[small]) {
			small = i
		}
	}
	if cap(o.free[small]) < cap(b) {
		o.free[small] = b
	}
}

// wake tells every watcher something changed. Called with mu held.
func (o *output) wake() {
	for ch := range o.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (o *output) watch() chan struct{} {
	ch := make(chan struct{}, 1)
	o.mu.Lock()
	o.watchers[ch] = struct{}{}
	o.mu.Unlock()
	return ch
}

func (o *output) unwatch(ch chan struct{}) {
	o.mu.Lock()
	delete(o.watchers, ch)
	o.mu.Unlock()
}

// resident returns the bytes of both streams' blocks not yet dropped.
func (o *output) resident() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.streams[streamStdout].alloc - o.streams[streamStdout].dropped +
		o.streams[streamStderr].alloc - o.streams[streamStderr].dropped
}

// counts returns produced bytes, kept bytes and truncation of both streams.
func (o *output) counts() (total, kept [2]int64, truncated [2]bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for s := range o.streams {
		total[s] = o.streams[s].total
		kept[s] = o.streams[s].kept
		truncated[s] = o.streams[s].truncated
	}
	return
}

// keptBytes returns a copy of the kept bytes of stream s (never nil).
func (o *output) keptBytes(s int) []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	st := &o.streams[s]
	out := make([]byte, 0, st.kept-st.dropped)
	for i := st.live; i < len(st.blocks); i++ {
		b := st.blocks[i]
		if end := st.kept - st.starts[i]; int64(len(b)) > end {
			b = b[:max(end, 0)]
		}
		out = append(out, b...)
	}
	return out
}

// capture reads stream s from f until EOF or an error, or, once f's read
// deadline passed, until f holds nothing more (see lateReader), storing up
// to the cap and counting the rest. It never blocks the writer on anything
// but this loop's own pace.
func (o *output) capture(s int, f *os.File, discard *sync.Pool) {
	r := &lateReader{f: f, limit: pendingLimit}
	var blk []byte // current block; blk[used:] is not yet valid
	used := 0
	full := false // the cap is allocated: count and drop the rest
	var scratch *[]byte
	defer func() {
		if scratch != nil {
			discard.Put(scratch)
		}
	}()
	for {
		if !full && used == len(blk) {
			blk, used = o.grow(s), 0
			full = blk == nil
		}
		var n int
		var err error
		if !full {
			n, err = r.Read(blk[used:])
			if n > 0 {
				used += n
				o.publish(s, n)
			}
		} else {
			if scratch == nil {
				scratch = discard.Get().(*[]byte)
			}
			n, err = r.Read(*scratch)
			if n > 0 {
				o.drop(s, n)
			}
		}
		if err != nil {
			return
		}
	}
}

// segment is a run of kept bytes of one stream to send.
type segment struct {
	stream   int
	from, to int64
	blocks   [][]byte
	starts   []int64
}

// cursor is a reader's position: the next offset of each stream.
type cursor [2]int64

// next returns up to maxBytes of kept output after c in arrival order, as
// at most maxSegs segments no longer than maxFrame, and the position after
// them. With no bytes pending it returns nil.
func (o *output) next(c cursor, maxFrame, maxBytes int64, maxSegs int) ([]segment, cursor) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var segs []segment
	var sent int64
	for sent < maxBytes && len(segs) < maxSegs {
		i := sort.Search(len(o.marks), func(i int) bool {
			return o.marks[i][0] > c[0] || o.marks[i][1] > c[1]
		})
		if i == len(o.marks) {
			break
		}
		s := streamStdout
		if o.marks[i][0] <= c[0] {
			s = streamStderr
		}
		to := min(o.marks[i][s], c[s]+maxFrame, c[s]+maxBytes-sent)
		st := &o.streams[s]
		segs = append(segs, segment{stream: s, from: c[s], to: to, blocks: st.blocks, starts: st.starts})
		sent += to - c[s]
		c[s] = to
	}
	return segs, c
}

// appendTo appends the segment's bytes to b.
func (g segment) appendTo(b []byte) []byte {
	i := sort.Search(len(g.starts), func(i int) bool { return g.starts[i] > g.from }) - 1
	for off := g.from; off < g.to; i++ {
		blk := g.blocks[i][off-g.starts[i]:]
		n := min(int64(len(blk)), g.to-off)
		b = append(b, blk[:n]...)
		off += n
	}
	return b
}

// writeTo writes head and then the segment's bytes to w, from the blocks
// where they lie.
func (g segment) writeTo(w io.Writer, head []byte) error {
	if _, err := w.Write(head); err != nil {
		return err
	}
	i := sort.Search(len(g.starts), func(i int) bool { return g.starts[i] > g.from }) - 1
	for off := g.from; off < g.to; i++ {
		blk := g.blocks[i][off-g.starts[i]:]
		n := min(int64(len(blk)), g.to-off)
		if _, err := w.Write(blk[:n]); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// state returns kept sizes and truncation under one lock, plus whether the
// output is complete.
func (o *output) state() (kept [2]int64, truncated [2]bool, closed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for s := range o.streams {
		kept[s] = o.streams[s].kept
		truncated[s] = o.streams[s].truncated
	}
	return kept, truncated, o.closed
}

// frameType is the output frame type of stream s.
func frameType(s int) agentproto.FrameType {
	if s == streamStderr {
		return agentproto.FrameStderr
	}
	return agentproto.FrameStdout
}
