package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// These tests start no processes (see unit_test.go).

// put stores data as the next bytes of stream s, as capture would.
func put(t *testing.T, o *output, s int, data []byte) {
	t.Helper()
	for len(data) > 0 {
		st := &o.streams[s]
		var blk []byte
		if n := len(st.blocks); n > 0 && st.kept < st.alloc {
			i := n - 1
			blk = st.blocks[i][st.kept-st.starts[i]:]
		} else if blk = o.grow(s); blk == nil {
			o.drop(s, len(data))
			return
		}
		n := copy(blk, data)
		o.publish(s, n)
		data = data[n:]
	}
}

// readAll follows next from c until nothing is pending, returning the bytes
// of each stream and the stream order of the segments.
func readAll(o *output, c cursor, maxFrame, maxBytes int64) (out [2][]byte, order []int, end cursor) {
	for {
		segs, nc := o.next(c, maxFrame, maxBytes, 1000)
		if len(segs) == 0 {
			return out, order, c
		}
		var sum int64
		for _, g := range segs {
			if g.from != c[g.stream] || g.to-g.from > maxFrame || g.to <= g.from {
				panic(fmt.Sprintf("segment %+v at cursor %v", g, c))
			}
			out[g.stream] = g.appendTo(out[g.stream])
			c[g.stream] = g.to
			sum += g.to - g.from
			order = append(order, g.stream)
		}
		if sum > maxBytes || c != nc {
			panic(fmt.Sprintf("batch of %d bytes, cursor %v vs %v", sum, c, nc))
		}
	}
}

func TestOutputOrderAndOffsets(t *testing.T) {
	t.Parallel()
	o := newOutput(1<<20, 1<<20)
	put(t, o, streamStdout, []byte("aaa"))
	put(t, o, streamStdout, []byte("bb"))
	put(t, o, streamStderr, []byte("E1"))
	put(t, o, streamStdout, []byte("c"))
	put(t, o, streamStderr, []byte("E2"))
	out, order, end := readAll(o, cursor{}, 2, 1<<20)
	if string(out[0]) != "aaabbc" || string(out[1]) != "E1E2" || end != (cursor{6, 4}) {
		t.Fatalf("out %q %q end %v", out[0], out[1], end)
	}
	// Segments of at most 2 bytes: aa a b b | E1 | c | E2
	if want := []int{0, 0, 0, 1, 0, 1}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	// Resuming inside a segment splits it; past the end yields nothing.
	out, order, _ = readAll(o, cursor{4, 1}, 64, 1<<20)
	if string(out[0]) != "bc" || string(out[1]) != "1E2" || !slices.Equal(order, []int{0, 1, 0, 1}) {
		t.Errorf("from 4/1: %q %q %v", out[0], out[1], order)
	}
	if segs, _ := o.next(cursor{6, 4}, 64, 64, 10); segs != nil {
		t.Errorf("at the end: %v", segs)
	}
	// maxBytes bounds one batch.
	segs, c := o.next(cursor{}, 64, 4, 10)
	if len(segs) != 1 || c != (cursor{4, 0}) {
		t.Errorf("batch of 4: %+v %v", segs, c)
	}
	// So does maxSegs.
	segs, c = o.next(cursor{}, 64, 100, 2)
	if len(segs) != 2 || c != (cursor{5, 2}) {
		t.Errorf("2 segments: %+v %v", segs, c)
	}
}

func TestOutputCapAndBlocks(t *testing.T) {
	t.Parallel()
	const capBytes = 300000 // not a block multiple
	o := newOutput(capBytes, 10)
	rng := rand.New(rand.NewPCG(1, 2))
	var want []byte
	for len(want) < 1<<20 {
		b := make([]byte, 1+rng.IntN(70000))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		want = append(want, b...)
		put(t, o, streamStdout, b)
	}
	total, kept, trunc := o.counts()
	if kept[0] != capBytes || total[0] != int64(len(want)) || !trunc[0] || trunc[1] {
		t.Fatalf("kept %v total %v truncated %v", kept, total, trunc)
	}
	if o.streams[0].alloc != capBytes {
		t.Errorf("allocated %d bytes for a cap of %d", o.streams[0].alloc, capBytes)
	}
	out, _, _ := readAll(o, cursor{}, 64<<10, 1<<20)
	if !bytes.Equal(out[0], want[:capBytes]) {
		t.Error("kept bytes differ from the first cap bytes written")
	}
	put(t, o, streamStderr, []byte("0123456789"))
	if _, _, trunc := o.counts(); trunc[1] {
		t.Error("exactly the cap is not truncated")
	}
	put(t, o, streamStderr, []byte("x"))
	if _, _, trunc := o.counts(); !trunc[1] {
		t.Error("one byte beyond the cap is truncated")
	}
}

func TestOutputCloseTrimsLastBlock(t *testing.T) {
	t.Parallel()
	o := newOutput(64<<20, 64<<20)
	data := bytes.Repeat([]byte("x"), 3<<20+5)
	put(t, o, streamStdout, data)
	before := o.streams[0].alloc
	o.close()
	if after := o.streams[0].alloc; after != int64(len(data)) || before <= after {
		t.Errorf("allocated %d before close, %d after, for %d bytes", before, after, len(data))
	}
	out, _, _ := readAll(o, cursor{}, 1<<20, 8<<20)
	if !bytes.Equal(out[0], data) {
		t.Error("data changed by close")
	}
}

// TestOutputThinning writes strictly alternating tiny chunks, far more than
// the order index may hold, while readers follow: every byte must arrive
// exactly once and in place, and the index must stay bounded.
func TestOutputThinning(t *testing.T) {
	t.Parallel()
	o := newOutput(64<<10, 64<<10)
	limit := o.maxMarks
	var want [2][]byte
	var wg sync.WaitGroup
	results := make(chan error, 4)
	stop := make(chan struct{})
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got [2][]byte
			c := cursor{}
			for {
				segs, nc := o.next(c, int64(1+r*7), 1<<20, 64)
				for _, g := range segs {
					got[g.stream] = g.appendTo(got[g.stream])
				}
				c = nc
				if len(segs) == 0 {
					select {
					case <-stop:
						segs, _ := o.next(c, 1<<20, 1<<30, 1<<30)
						for _, g := range segs {
							got[g.stream] = g.appendTo(got[g.stream])
						}
						if !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
							results <- fmt.Errorf("reader %d: %d/%d bytes, want %d/%d", r, len(got[0]), len(got[1]), len(want[0]), len(want[1]))
						}
						return
					default:
						time.Sleep(50 * time.Microsecond)
					}
				}
			}
		}()
	}
	for i := range 50000 {
		s := i % 2
		b := []byte{byte(i), byte(i >> 8)}[:1+i%2]
		want[s] = append(want[s], b...)
		put(t, o, s, b)
		if len(o.marks) > limit {
			t.Fatalf("index has %d marks, limit %d", len(o.marks), limit)
		}
	}
	close(stop)
	wg.Wait()
	close(results)
	for err := range results {
		t.Error(err)
	}
}

func TestCaptureFromPipe(t *testing.T) {
	t.Parallel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	o := newOutput(5000, 5000)
	var pool sync.Pool
	pool.New = func() any { b := make([]byte, 1000); return &b }
	done := make(chan struct{})
	go func() { o.capture(streamStderr, r, &pool); close(done) }()
	data := make([]byte, 12345)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	w.Close()
	<-done
	total, kept, trunc := o.counts()
	if total[1] != 12345 || kept[1] != 5000 || !trunc[1] || total[0] != 0 {
		t.Fatalf("total %v kept %v truncated %v", total, kept, trunc)
	}
	out, _, _ := readAll(o, cursor{}, 4096, 1<<20)
	if !bytes.Equal(out[1], data[:5000]) {
		t.Error("captured bytes differ")
	}
}

func TestParseProcStat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want procEntry
		ok   bool
	}{
		{"1234 (sleep) S 1 1234 1234 0 -1 4194304 94 0 0 0\n", procEntry{1234, 1, 'S'}, true},
		{"77 (a b) c) Z 5 77 77 0\n", procEntry{77, 5, 'Z'}, true},
		{"9 ((sd-pam)) R 8 9 9", procEntry{9, 8, 'R'}, true},
		{"1 (init) S 0 1 1 0 -1\n", procEntry{1, 0, 'S'}, true},
		{"12 (x) S", procEntry{}, false},
		{"12 (x) S -3 1", procEntry{}, false},
		{"x (x) S 1 1", procEntry{}, false},
		{"", procEntry{}, false},
		{"12 x) S 1", procEntry{}, false},
	}
	for _, tc := range tests {
		got, ok := parseProcStat([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseProcStat(%q) = %+v, %v; want %+v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("1234 (sleep) S 1 1234 1234 0 -1 4194304\n"))
	f.Add([]byte("77 (a) b) c) Z 5 77\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, ok := parseProcStat(b)
		if ok && (p.pid <= 0 || p.ppid < 0) {
			t.Fatalf("accepted %+v from %q", p, b)
		}
	})
}

func TestTreeBelow(t *testing.T) {
	t.Parallel()
	// 10 (shim) -> 11 -> 12 -> 13; 14 reparented to 10; 20 unrelated; 21 child of 20.
	procs := []procEntry{
		{1, 0, 'S'}, {10, 1, 'S'}, {11, 10, 'S'}, {12, 11, 'S'}, {13, 12, 'Z'},
		{14, 10, 'S'}, {20, 1, 'S'}, {21, 20, 'S'},
	}
	var pids []int
	for _, p := range treeBelow(procs, 10, map[int][]int{}) {
		pids = append(pids, p.pid)
	}
	slices.Sort(pids)
	if !slices.Equal(pids, []int{11, 12, 13, 14}) {
		t.Errorf("below 10: %v", pids)
	}
}

// TestProcScannerSeesSelf checks the /proc walk on the machine's own /proc.
func TestProcScannerSeesSelf(t *testing.T) {
	t.Parallel()
	ps, err := newProcScanner("/proc").scan()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ps, func(p procEntry) bool { return p.pid == os.Getpid() })
	if i < 0 || ps[i].ppid != os.Getppid() {
		t.Fatalf("own process not found with its parent in %d entries", len(ps))
	}
}

func TestJobTableEviction(t *testing.T) {
	t.Parallel()
	var tb jobTable
	tb.init()
	now := time.Now()
	mk := func(id string, kept int) *bgJob {
		j := newBGJob(id, 1<<20, now)
		put(t, j.out, streamStdout, make([]byte, kept))
		if err := tb.add(j, 100); err != nil {
			t.Fatal(err)
		}
		return j
	}
	a, b, c := mk("a", 10), mk("b", 10), mk("c", 10)
	if err := tb.add(newBGJob("a", 1, now), 100); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("duplicate: %v", err)
	}
	if err := tb.add(newBGJob("d", 1, now), 3); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Errorf("over the running limit: %v", err)
	}
	if err := tb.forget("a"); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("forget running: %v", err)
	}
	for _, j := range []*bgJob{a, b, c} {
		j.finish(agentproto.ExitResult{})
		tb.markFinished(j, 2, 1<<30)
	}
	if _, err := tb.get("a"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("oldest finished job not evicted: %v", err)
	}
	if err := tb.forget("b"); err != nil {
		t.Errorf("forget: %v", err)
	}
	// A memory budget evicts too, but never the newest finished job.
	d, e := mk("d", 600), mk("e", 600)
	d.finish(agentproto.ExitResult{})
	tb.markFinished(d, 10, 1000)
	e.finish(agentproto.ExitResult{})
	tb.markFinished(e, 10, 100)
	var ids []string
	for _, j := range tb.list() {
		ids = append(ids, j.id)
	}
	if !slices.Equal(ids, []string{"e"}) {
		t.Errorf("left %v, want [e]", ids)
	}
}

func TestValidJobID(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"job_01HX", "a", "x.y-z:1"} {
		if err := validJobID(id); err != nil {
			t.Errorf("%q: %v", id, err)
		}
	}
	for _, id := range []string{"", ".", "..", "a/b", "a b", "é", string(make([]byte, 200))} {
		if err := validJobID(id); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%q accepted", id)
		}
	}
}

// TestLateReader: a reader that runs only after the drain deadline still
// gets what the pipe held, bounded by its limit, although an (escaped)
// writer keeps the pipe open.
func TestLateReader(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ limit, want int64 }{{1 << 20, 10000}, {4096, 4096}} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(make([]byte, 10000)); err != nil {
			t.Fatal(err)
		}
		r.SetReadDeadline(time.Now().Add(-time.Second))
		if n, _ := r.Read(make([]byte, 10)); n != 0 {
			t.Fatalf("a plain read past the deadline got %d bytes", n)
		}
		n, err := io.Copy(io.Discard, &lateReader{f: r, limit: tc.limit})
		if n != tc.want || err != nil {
			t.Errorf("limit %d: read %d bytes, %v; want %d", tc.limit, n, err, tc.want)
		}
		r.Close()
		w.Close()
	}
}

// patterned is the byte at offset i of stream s in TestOutputRelease.
func patterned(s int, i int64) byte { return byte(i*7 + i>>13 + int64(s)*101) }

// TestOutputRelease checks that output the service stored is dropped once
// no reader needs it, that its blocks carry new output without changing
// what readers get, that a reader holds back what it has not read, and that
// a stream cannot start below the dropped output.
func TestOutputRelease(t *testing.T) {
	t.Parallel()
	const total = 96 << 20
	o := newOutput(total, total)
	live, err := o.addReader(cursor{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	var written cursor
	var c cursor
	var maxResident int64
	check := func(segs []segment) {
		for _, g := range segs {
			b := g.appendTo(nil)
			for i, x := range b {
				if want := patterned(g.stream, g.from+int64(i)); x != want {
					t.Fatalf("stream %d offset %d: %d, want %d", g.stream, g.from+int64(i), x, want)
				}
			}
		}
	}
	// drain reads and checks everything pending after c, advancing the
	// registered reader rp (if any) as it goes.
	drain := func(c cursor, rp *cursor) cursor {
		for {
			segs, nc := o.next(c, 1<<20, 4<<20, 64)
			if len(segs) == 0 {
				return c
			}
			check(segs)
			c = nc
			if rp != nil {
				o.advance(rp, c)
			}
		}
	}
	var late *cursor // a second reader, opened at 32 MiB, that reads nothing until the end
	for written[0]+written[1] < total {
		s := rng.IntN(2)
		chunk := make([]byte, 1+rng.IntN(3<<20))
		for i := range chunk {
			chunk[i] = patterned(s, written[s]+int64(i))
		}
		put(t, o, s, chunk)
		written[s] += int64(len(chunk))
		c = drain(c, live)
		o.release(c)
		if late == nil && c[0] >= 32<<20 {
			if late, err = o.addReader(c); err != nil {
				t.Fatal(err)
			}
		}
		maxResident = max(maxResident, o.resident())
	}
	if late == nil {
		t.Fatal("stdout never reached 32 MiB")
	}
	// The late reader kept its part: it reads everything after its start.
	if lc := drain(*late, nil); lc != written {
		t.Fatalf("late reader ended at %v, want %v", lc, written)
	}
	if _, err := o.addReader(cursor{}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("reader from 0 after release: %v, want failed precondition", err)
	}
	before := o.resident()
	o.dropReader(late)
	o.dropReader(live)
	if after := o.resident(); after >= before || after > 2*maxBlock {
		t.Errorf("resident %d bytes with the late reader, %d after it left; want far less", before, after)
	}
	t.Logf("%d MiB written, at most %d MiB resident", total>>20, maxResident>>20)
}

// TestOutputReusesFullBlocks checks that a stream the service keeps up with
// carries its output in the full-size blocks it released, not in fresh
// ones: the small first blocks, dropped first, must not take the places
// of the free list.
func TestOutputReusesFullBlocks(t *testing.T) {
	t.Parallel()
	const total = 128 << 20
	o := newOutput(total, total)
	rp, err := o.addReader(cursor{})
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	var c cursor
	for written := int64(0); written < total; written += int64(len(chunk)) {
		for i := range chunk {
			chunk[i] = patterned(streamStdout, written+int64(i))
		}
		put(t, o, streamStdout, chunk)
		for {
			segs, nc := o.next(c, 1<<20, 2<<20, 16)
			if len(segs) == 0 {
				break
			}
			for _, g := range segs {
				for i, x := range g.appendTo(nil) {
					if want := patterned(g.stream, g.from+int64(i)); x != want {
						t.Fatalf("offset %d: %d, want %d", g.from+int64(i), x, want)
					}
				}
			}
			c = nc
			o.advance(rp, c)
		}
		if c[streamStdout]%(8<<20) == 0 { // as the service releases
			o.release(c)
		}
	}
	small := 0
	for b := firstBlock; b < maxBlock; b *= 2 {
		small++
	}
	o.mu.Lock()
	fresh := o.fresh
	o.mu.Unlock()
	// Two full-size blocks in use at a release, one being filled: the
	// rest of the 128 MiB goes into released ones.
	if big := fresh - small; big > 3 {
		t.Errorf("%d full-size blocks allocated for %d MiB; want at most 3 (the rest reused)", big, total>>20)
	}
}
