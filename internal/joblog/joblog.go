package joblog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// Store holds the logs of all jobs under one directory.
type Store struct {
	dir string

	mu     sync.Mutex
	logs   map[string]*Log // open logs (being written or followed)
	spares *spares         // nil without KeepSpares
}

// Open returns a Store rooted at dir (created if missing).
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("joblog: %w", err)
	}
	return &Store{dir: dir, logs: map[string]*Log{}}, nil
}

func (s *Store) path(jobID string) string { return filepath.Join(s.dir, jobID+".log") }

// Log is one job's log. Appends are serialized; readers may run concurrently.
type Log struct {
	path string

	mu      sync.Mutex
	f       *os.File // append handle, nil when opened read-only
	size    int64
	stdout  int64 // next stdout offset
	stderr  int64
	exited  bool
	exit    []byte        // payload of the exit frame, once appended
	changed chan struct{} // closed and replaced on every append
	wbuf    []byte        // encoding buffer of Append, reused
	// index holds frame starts, one at least every indexEvery bytes of
	// log, in order: a cursor is checked from the nearest one below it.
	index []int64
}

// indexEvery is the spacing of the sparse frame index.
const indexEvery = 256 << 10

// noteFrame adds the frame starting at off to the sparse index.
func (l *Log) noteFrame(off int64) {
	last := int64(0)
	if n := len(l.index); n > 0 {
		last = l.index[n-1]
	}
	if off-last >= indexEvery {
		l.index = append(l.index, off)
	}
}

// headerReader reads frame headers at arbitrary offsets of a log file
// through a window, so runs of small frames cost one read per window and a
// large frame's payload is skipped, not read.
type headerReader struct {
	f          *os.File
	end        int64
	win        []byte
	start, got int64 // the window holds [start, start+got)
}

// header returns the header of the frame at off.
func (h *headerReader) header(off int64) ([]byte, error) {
	if off < h.start || off+agentproto.FrameHeaderSize > h.start+h.got {
		if h.win == nil {
			h.win = make([]byte, 64<<10)
		}
		n := min(int64(len(h.win)), h.end-off)
		if n < agentproto.FrameHeaderSize {
			return nil, io.ErrUnexpectedEOF
		}
		if _, err := h.f.ReadAt(h.win[:n], off); err != nil {
			return nil, err
		}
		h.start, h.got = off, n
	}
	return h.win[off-h.start : off-h.start+agentproto.FrameHeaderSize], nil
}

// maxKeptWriteBuffer bounds the encoding buffer a log keeps between appends.
const maxKeptWriteBuffer = 4 << 20

// Get opens (or returns the already open) log of jobID, creating the file if
// create is set (from a spare, if the store keeps them). On open it scans the file, drops a torn final frame left by
// a crash, and recovers the stream offsets.
func (s *Store) Get(jobID string, create bool) (*Log, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.logs[jobID]; ok {
		return l, nil
	}
	p := s.path(jobID)
	if create && s.spares != nil {
		if f, ok := s.spares.take(p); ok { // a new, empty log: nothing to recover
			l := &Log{path: p, f: f, changed: make(chan struct{})}
			s.logs[jobID] = l
			return l, nil
		}
	}
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(p, flags, 0o600)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("log of job %s: %w", jobID, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("joblog: %w", err)
	}
	l := &Log{path: p, f: f, changed: make(chan struct{})}
	if err := l.recover(); err != nil {
		f.Close()
		return nil, err
	}
	s.logs[jobID] = l
	return l, nil
}

// Release closes the append handle of a finished job's log and forgets it.
func (s *Store) Release(jobID string) {
	s.mu.Lock()
	l, ok := s.logs[jobID]
	delete(s.logs, jobID)
	s.mu.Unlock()
	if ok {
		l.mu.Lock()
		if l.f != nil {
			l.f.Close()
			l.f = nil
		}
		l.mu.Unlock()
	}
}

// Remove deletes a job's log file.
func (s *Store) Remove(jobID string) error {
	s.Release(jobID)
	err := os.Remove(s.path(jobID))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// View returns the log of jobID for reading: the open log when it is being
// written, else a snapshot of the file that holds no file handle (nothing
// appends to a log that is not open) and needs no Release.
func (s *Store) View(jobID string) (*Log, error) {
	s.mu.Lock()
	l, ok := s.logs[jobID]
	s.mu.Unlock()
	if ok {
		return l, nil
	}
	p := s.path(jobID)
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("log of job %s: %w", jobID, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("joblog: %w", err)
	}
	defer f.Close()
	l = &Log{path: p, changed: make(chan struct{})}
	if l.size, err = l.scan(f); err != nil {
		return nil, err
	}
	return l, nil
}

// recover scans the log (see scan), cuts off a torn or corrupt tail (a
// crash mid-append) and positions the append handle at the end.
func (l *Log) recover() error {
	off, err := l.scan(l.f)
	if err != nil {
		return err
	}
	info, err := l.f.Stat()
	if err != nil {
		return fmt.Errorf("joblog: %w", err)
	}
	if off != info.Size() {
		if err := l.f.Truncate(off); err != nil {
			return fmt.Errorf("joblog: truncating torn tail: %w", err)
		}
	}
	l.size = off
	_, err = l.f.Seek(off, io.SeekStart)
	return err
}

// scan reads the frame headers of f (payloads are skipped, except the exit
// frame's), so opening a large log costs one read per frame, not per byte,
// and recovers the stream offsets. It returns the end of the last whole,
// valid frame.
func (l *Log) scan(f *os.File) (int64, error) {
	info, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("joblog: %w", err)
	}
	end := info.Size()
	hr := &headerReader{f: f, end: end}
	var off int64
	for off < end {
		if end-off < agentproto.FrameHeaderSize {
			break
		}
		h, err := hr.header(off)
		if err != nil {
			return 0, fmt.Errorf("joblog: reading %s: %w", l.path, err)
		}
		t, n, so, err := agentproto.ParseFrameHeader(h)
		if err != nil || off+agentproto.FrameHeaderSize+int64(n) > end {
			break
		}
		l.noteFrame(off)
		fr := agentproto.Frame{Type: t, Offset: so}
		if t == agentproto.FrameExit {
			fr.Payload = make([]byte, n)
			if _, err := f.ReadAt(fr.Payload, off+agentproto.FrameHeaderSize); err != nil {
				return 0, fmt.Errorf("joblog: reading %s: %w", l.path, err)
			}
		}
		l.applyLen(fr, int64(n))
		off += agentproto.FrameHeaderSize + int64(n)
	}
	return off, nil
}

// applyLen is apply for a frame whose payload may not have been read.
func (l *Log) applyLen(fr agentproto.Frame, n int64) {
	switch fr.Type {
	case agentproto.FrameStdout:
		l.stdout = fr.Offset + n
	case agentproto.FrameStderr:
		l.stderr = fr.Offset + n
	default:
		l.apply(fr)
	}
}

func (l *Log) apply(fr agentproto.Frame) {
	switch fr.Type {
	case agentproto.FrameStdout:
		l.stdout = fr.Offset + int64(len(fr.Payload))
	case agentproto.FrameStderr:
		l.stderr = fr.Offset + int64(len(fr.Payload))
	case agentproto.FrameExit:
		l.exited = true
		l.exit = append([]byte(nil), fr.Payload...)
	}
}

// ExitPayload returns the payload of the exit frame (the agent's ExitResult
// JSON), or nil while the job has not ended.
func (l *Log) ExitPayload() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.exit
}

// Offsets returns the next stdout and stderr offsets the log expects (where
// a resumed agent stream must start) and whether the exit frame is in.
func (l *Log) Offsets() (stdout, stderr int64, exited bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stdout, l.stderr, l.exited
}

// Size returns the log's size: the cursor after the last frame.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}

// directWrite is the payload size from which Append writes a frame's
// payload straight from the caller's memory, after its header, instead of
// copying it into the encoding buffer first: a job's bulk output arrives
// in frames of up to a MiB, and that copy was a tenth of the service's
// work of streaming it.
const directWrite = 64 << 10

// Append writes frames and wakes followers. Output frames must continue the
// stream exactly where the log ends (a duplicate or overlapping prefix is
// trimmed; a gap is an error), so a resumed agent stream can never create
// duplicates. Nothing is appended after the exit frame. An append is all or
// nothing: readers see its frames once all are written, and after an error
// (a gap, a failed write) the log is as it was before it.
func (l *Log) Append(frames ...agentproto.Frame) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return fmt.Errorf("joblog: %s is closed: %w", l.path, errdefs.ErrFailedPrecondition)
	}
	stdout, stderr, exited, exit, indexed := l.stdout, l.stderr, l.exited, l.exit, len(l.index)
	fail := func(err error) error {
		l.stdout, l.stderr, l.exited, l.exit, l.index = stdout, stderr, exited, exit, l.index[:indexed]
		// Cut what this append wrote (best effort: the error is reported
		// either way), so that the next one continues where the log ends.
		if l.f.Truncate(l.size) == nil {
			_, _ = l.f.Seek(l.size, io.SeekStart)
		}
		return err
	}
	b := l.wbuf[:0]
	var written int64 // bytes of this append already in the file
	for _, fr := range frames {
		if l.exited {
			break
		}
		switch fr.Type {
		case agentproto.FrameStdout, agentproto.FrameStderr:
			next := &l.stdout
			if fr.Type == agentproto.FrameStderr {
				next = &l.stderr
			}
			if fr.Offset > *next {
				return fail(fmt.Errorf("joblog: gap in stream %d: have %d, frame starts at %d: %w", fr.Type, *next, fr.Offset, errdefs.ErrInternal))
			}
			skip := *next - fr.Offset
			if skip >= int64(len(fr.Payload)) {
				continue // already have all of it
			}
			fr = agentproto.Frame{Type: fr.Type, Offset: *next, Payload: fr.Payload[skip:]}
		}
		l.noteFrame(l.size + written + int64(len(b)))
		if len(fr.Payload) < directWrite {
			b = agentproto.AppendFrame(b, fr)
		} else {
			b = agentproto.AppendFrameHeader(b, fr)
			for _, p := range [][]byte{b, fr.Payload} {
				if _, err := l.f.Write(p); err != nil {
					return fail(fmt.Errorf("joblog: %w", err))
				}
				written += int64(len(p))
			}
			b = b[:0]
		}
		l.apply(fr)
	}
	if cap(b) <= maxKeptWriteBuffer {
		l.wbuf = b[:0]
	}
	if len(b) > 0 {
		if _, err := l.f.Write(b); err != nil {
			return fail(fmt.Errorf("joblog: %w", err))
		}
		written += int64(len(b))
	}
	if written == 0 {
		return nil
	}
	l.size += written
	close(l.changed)
	l.changed = make(chan struct{})
	return nil
}

// Event is one frame read back with the cursor that follows it.
type Event struct {
	agentproto.Frame
	Cursor int64 // resume here to get the next event
}

// Exit decodes the payload of an exit frame.
func (e Event) Exit() (agentproto.ExitResult, error) {
	var x agentproto.ExitResult
	err := json.Unmarshal(e.Payload, &x)
	return x, err
}

// ValidCursor reports whether cursor is a frame boundary of the log.
func (l *Log) ValidCursor(cursor int64) (bool, error) {
	size := l.Size()
	if cursor < 0 {
		return false, nil
	}
	if cursor == 0 || cursor >= size {
		return true, nil // at or beyond the end: the reader waits (follow) or ends
	}
	l.mu.Lock()
	i, _ := slices.BinarySearch(l.index, cursor+1)
	var off int64
	if i > 0 {
		off = l.index[i-1] // the nearest indexed frame at or below cursor
	}
	l.mu.Unlock()
	f, err := os.Open(l.path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	hr := &headerReader{f: f, end: size}
	for off < cursor {
		h, err := hr.header(off)
		if err != nil {
			return false, err
		}
		_, n, _, err := agentproto.ParseFrameHeader(h)
		if err != nil {
			return false, err
		}
		off += agentproto.FrameHeaderSize + int64(n)
	}
	return off == cursor, nil
}

// Read calls fn for each event from cursor on. With follow it waits for new
// frames until the exit frame has been delivered or ctx ends; without it
// returns at the current end. A cursor beyond the end waits (follow) or
// returns at once. An event's Payload is only valid during the call to fn.
func (l *Log) Read(ctx context.Context, cursor int64, follow bool, fn func(Event) error) error {
	r, err := l.NewReader(cursor)
	if err != nil {
		return err
	}
	defer r.Close()
	for {
		changed := l.Wait()
		exited, err := r.ReadAvailable(fn)
		if err != nil || exited {
			return err
		}
		if _, _, done := l.Offsets(); !follow || done && r.Cursor() >= l.Size() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// readChunk is how much of the log a Reader reads at once (at least one
// whole frame of the largest size) when it reads it with pread.
const readChunk = 2 << 20

// Mapped reading: a reader of a finished log (a replay) that has mapMin
// bytes or more to read maps the log file (a window of mapWindow bytes at a time, plus room for one whole
// frame that starts in the window) and hands out payloads from the page
// cache itself. A read copied every byte of a bulk stream once more — out
// of the page cache into the reader's buffer, right before the SSE writer
// encodes or copies it anyway — and that copy was a fifth of the service's
// CPU for a base64 stream. A live reader reads with pread: it reads bytes
// just written, still in the CPU's caches, where the copy costs about what
// the mapping does (BenchmarkLiveFollow), and in the interleaved
// StreamClient runs live streams were not cheaper mapped, maybe dearer (the
// unmapping of each window interrupts the service's other threads). Only
// bytes below the log's size are ever touched: the mapping may reach
// beyond the end of the file, but the pages past the end are not read. The window is small enough that a reader's mapped pages (which
// count in the service's resident size, though they are the page cache's)
// stay a few MiB, and large enough that mapping it costs next to nothing
// per byte.
const (
	mapMin    = 1 << 20
	mapWindow = 16 << 20
	mapLen    = mapWindow + 2<<20 // a window and more than one largest frame
)

// Reader reads a log's events in order from a cursor. It keeps its own
// file handle, and either a buffer (small reads) or a mapping of the file
// (bulk reads), so a follower woken by an append pays one read (or none)
// for what was appended, and payloads are handed out straight from there.
type Reader struct {
	l      *Log
	f      *os.File
	cursor int64
	buf    []byte
	m      []byte // mapping of the file from mOff, nil when none
	mOff   int64
	mReady int64 // the mapping's page tables are populated below this offset
}

// NewReader returns a reader of l positioned at cursor, which should be a
// frame boundary (see ValidCursor). Close it when done.
func (l *Log) NewReader(cursor int64) (*Reader, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, fmt.Errorf("joblog: %w", err)
	}
	return &Reader{l: l, f: f, cursor: cursor}, nil
}

// Close releases the reader's file handle and mapping.
func (r *Reader) Close() error {
	r.unmap()
	return r.f.Close()
}

func (r *Reader) unmap() {
	if r.m != nil {
		_ = unix.Munmap(r.m)
		r.m = nil
	}
}

// Cursor is the position after the last event delivered: where a resumed
// reader continues.
func (r *Reader) Cursor() int64 { return r.cursor }

// view returns the log's bytes from the reader's cursor to at most size:
// from the mapping when it holds the cursor's window or when the log is
// finished and there is mapMin or more to read (mapping the window then),
// else read into buf.
// The bytes start at a frame and hold at least one whole frame unless the
// log is corrupt.
func (r *Reader) view(size int64) ([]byte, error) {
	if r.m == nil || r.cursor < r.mOff || r.cursor >= r.mOff+mapWindow {
		r.unmap()
		if _, _, done := r.l.Offsets(); done && size-r.cursor >= mapMin {
			off := r.cursor &^ (mapWindow - 1)
			m, err := unix.Mmap(int(r.f.Fd()), off, mapLen, unix.PROT_READ, unix.MAP_SHARED)
			if err == nil {
				r.m, r.mOff, r.mReady = m, off, off
			}
			// On an error (address space, a file system without mmap):
			// read instead.
		}
	}
	if r.m == nil {
		n := min(size-r.cursor, readChunk)
		if int64(cap(r.buf)) < n {
			r.buf = make([]byte, n)
		}
		b := r.buf[:n]
		if _, err := r.f.ReadAt(b, r.cursor); err != nil {
			return nil, fmt.Errorf("joblog: reading %s at %d: %w", r.l.path, r.cursor, err)
		}
		return b, nil
	}
	end := min(size, r.mOff+int64(len(r.m)))
	if end > r.mReady {
		// Fill the page tables of the new bytes in one call rather than a
		// page fault per 64 KiB as they are read (best effort: kernels
		// before 5.14 fault them in). An I/O error shows here rather than
		// as a fault.
		from := r.mReady &^ int64(os.Getpagesize()-1)
		if err := unix.Madvise(r.m[from-r.mOff:end-r.mOff], unix.MADV_POPULATE_READ); errors.Is(err, unix.EIO) {
			return nil, fmt.Errorf("joblog: reading %s at %d: %w", r.l.path, r.cursor, err)
		}
		r.mReady = end
	}
	return r.m[r.cursor-r.mOff : end-r.mOff], nil
}

// ReadAvailable calls fn for every event in the log now, from the reader's
// position on, and reports whether the exit frame was among them (nothing
// follows it). An event's Payload is only valid during the call to fn.
// After an error from fn the reader stays at the event fn failed on.
func (r *Reader) ReadAvailable(fn func(Event) error) (exited bool, err error) {
	size := r.l.Size()
	if _, _, done := r.l.Offsets(); done && size-r.cursor >= mapMin || r.m != nil {
		// A payload read from the mapping whose page the kernel cannot
		// read back (an I/O error after it was evicted) faults: make that
		// an error of this read, not the end of the process.
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if p := recover(); p != nil {
				fault, ok := p.(interface{ Addr() uintptr })
				if !ok || !r.mapped(fault.Addr()) {
					panic(p)
				}
				exited, err = false, fmt.Errorf("joblog: reading %s at %d: fault in the mapped log: %w", r.l.path, r.cursor, errdefs.ErrUnavailable)
			}
		}()
	}
	for r.cursor < size {
		b, err := r.view(size)
		if err != nil {
			return false, err
		}
		from := r.cursor
		for len(b) >= agentproto.FrameHeaderSize {
			t, plen, off, err := agentproto.ParseFrameHeader(b)
			if err != nil {
				return false, fmt.Errorf("joblog: reading %s at %d: %w", r.l.path, r.cursor, err)
			}
			end := agentproto.FrameHeaderSize + int(plen)
			if end > len(b) {
				break // the rest of this frame comes with the next view
			}
			next := r.cursor + int64(end)
			e := Event{Frame: agentproto.Frame{Type: t, Offset: off, Payload: b[agentproto.FrameHeaderSize:end:end]}, Cursor: next}
			if err := fn(e); err != nil {
				return false, err
			}
			r.cursor = next
			if t == agentproto.FrameExit {
				return true, nil
			}
			b = b[end:]
		}
		if r.cursor == from {
			// A view starts at a frame and holds a whole one unless the
			// frame runs beyond the log's end.
			return false, fmt.Errorf("joblog: reading %s at %d: %w: frame beyond the log's end", r.l.path, r.cursor, agentproto.ErrBadFrame)
		}
	}
	return false, nil
}

// mapped reports whether addr lies in the reader's mapping.
func (r *Reader) mapped(addr uintptr) bool {
	if r.m == nil {
		return false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(r.m)))
	return addr >= base && addr < base+uintptr(len(r.m))
}

// Wait returns a channel closed at the next append (for keepalive loops).
func (l *Log) Wait() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// Expired lists the jobs whose log file was last written before cutoff and
// is not open (being written or followed) now.
func (s *Store) Expired(cutoff time.Time) []string {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || s.logs[id] != nil {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
			out = append(out, id)
		}
	}
	return out
}
