package joblog

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
)

func out(t agentproto.FrameType, off int64, s string) agentproto.Frame {
	return agentproto.Frame{Type: t, Offset: off, Payload: []byte(s)}
}

func exitFrame(t *testing.T, code int) agentproto.Frame {
	b, err := json.Marshal(agentproto.ExitResult{ExitCode: code, ExitReason: "exited"})
	if err != nil {
		t.Fatal(err)
	}
	return agentproto.Frame{Type: agentproto.FrameExit, Payload: b}
}

// collect reads everything from cursor and returns stdout, stderr, cursors.
func collect(t *testing.T, l *Log, cursor int64) (stdout, stderr []byte, cursors []int64, exit bool) {
	t.Helper()
	err := l.Read(context.Background(), cursor, false, func(e Event) error {
		switch e.Type {
		case agentproto.FrameStdout:
			stdout = append(stdout, e.Payload...)
		case agentproto.FrameStderr:
			stderr = append(stderr, e.Payload...)
		case agentproto.FrameExit:
			exit = true
		}
		cursors = append(cursors, e.Cursor)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return
}

func TestAppendReadResumeNoGapNoDuplicate(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Get("job_a", true)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var wantOut, wantErr []byte
	for i := 0; i < 200; i++ {
		chunk := make([]byte, rng.IntN(5000)+1)
		for j := range chunk {
			chunk[j] = byte(rng.IntN(256))
		}
		if rng.IntN(2) == 0 {
			if err := l.Append(agentproto.Frame{Type: agentproto.FrameStdout, Offset: int64(len(wantOut)), Payload: chunk}); err != nil {
				t.Fatal(err)
			}
			wantOut = append(wantOut, chunk...)
		} else {
			if err := l.Append(agentproto.Frame{Type: agentproto.FrameStderr, Offset: int64(len(wantErr)), Payload: chunk}); err != nil {
				t.Fatal(err)
			}
			wantErr = append(wantErr, chunk...)
		}
	}
	if err := l.Append(exitFrame(t, 0)); err != nil {
		t.Fatal(err)
	}
	_, _, cursors, exit := collect(t, l, 0)
	if !exit {
		t.Fatal("no exit event")
	}
	// Resume from every cursor once: prefix before + suffix after equals whole.
	for _, c := range cursors {
		ok, err := l.ValidCursor(c)
		if err != nil || !ok {
			t.Fatalf("cursor %d not valid: %v", c, err)
		}
	}
	for i := 0; i < 30; i++ {
		cut := cursors[rng.IntN(len(cursors))]
		var gotOut, gotErr []byte
		err := l.Read(context.Background(), 0, false, func(e Event) error {
			if e.Cursor > cut {
				return errStop
			}
			if e.Type == agentproto.FrameStdout {
				gotOut = append(gotOut, e.Payload...)
			} else if e.Type == agentproto.FrameStderr {
				gotErr = append(gotErr, e.Payload...)
			}
			return nil
		})
		if err != nil && err != errStop {
			t.Fatal(err)
		}
		o2, e2, _, _ := collect(t, l, cut)
		if !bytes.Equal(append(gotOut, o2...), wantOut) || !bytes.Equal(append(gotErr, e2...), wantErr) {
			t.Fatalf("resume at %d lost or duplicated bytes", cut)
		}
	}
	if ok, _ := l.ValidCursor(3); ok {
		t.Fatal("mid-frame cursor accepted")
	}
	if ok, _ := l.ValidCursor(-1); ok {
		t.Fatal("negative cursor accepted")
	}
}

type stopErr struct{}

func (stopErr) Error() string { return "stop" }

var errStop = stopErr{}

func TestAppendTrimsOverlapAndRefusesGap(t *testing.T) {
	t.Parallel()
	s, _ := Open(t.TempDir())
	l, err := s.Get("job_b", true)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.Append(out(agentproto.FrameStdout, 0, "hello")))
	must(l.Append(out(agentproto.FrameStdout, 3, "lo world"))) // overlap: "lo" dropped
	must(l.Append(out(agentproto.FrameStdout, 0, "hel")))      // all old: dropped
	if err := l.Append(out(agentproto.FrameStdout, 100, "x")); err == nil {
		t.Fatal("gap accepted")
	}
	o, _, _, _ := collect(t, l, 0)
	if string(o) != "hello world" {
		t.Fatalf("got %q", o)
	}
	must(l.Append(exitFrame(t, 0)))
	must(l.Append(out(agentproto.FrameStdout, 11, "late")))
	o, _, _, exit := collect(t, l, 0)
	if string(o) != "hello world" || !exit {
		t.Fatalf("after exit got %q exit=%v", o, exit)
	}
}

func TestRecoverTornTailAndOffsets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := Open(dir)
	l, _ := s.Get("job_c", true)
	if err := l.Append(out(agentproto.FrameStdout, 0, "abc"), out(agentproto.FrameStderr, 0, "E")); err != nil {
		t.Fatal(err)
	}
	s.Release("job_c")
	// Simulate a crash mid-append: half a frame at the end.
	f, _ := os.OpenFile(s.path("job_c"), os.O_WRONLY|os.O_APPEND, 0)
	f.Write(agentproto.AppendFrame(nil, out(agentproto.FrameStdout, 3, "defgh"))[:10])
	f.Close()
	s2, _ := Open(dir)
	l2, err := s2.Get("job_c", false)
	if err != nil {
		t.Fatal(err)
	}
	so, se, exited := l2.Offsets()
	if so != 3 || se != 1 || exited {
		t.Fatalf("offsets %d %d %v", so, se, exited)
	}
	if err := l2.Append(out(agentproto.FrameStdout, 3, "def")); err != nil {
		t.Fatal(err)
	}
	o, e, _, _ := collect(t, l2, 0)
	if string(o) != "abcdef" || string(e) != "E" {
		t.Fatalf("got %q %q", o, e)
	}
	if _, err := s2.Get("job_missing", false); err == nil {
		t.Fatal("missing log opened")
	}
}

func TestFollowWakesAndEndsAtExit(t *testing.T) {
	t.Parallel()
	s, _ := Open(t.TempDir())
	l, _ := s.Get("job_d", true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan string, 1)
	go func() {
		var b []byte
		err := l.Read(ctx, 0, true, func(e Event) error {
			b = append(b, e.Payload...)
			return nil
		})
		if err != nil {
			b = append(b, []byte("ERR:"+err.Error())...)
		}
		got <- string(b)
	}()
	for _, p := range []string{"a", "b", "c"} {
		off := int64(p[0] - 'a')
		if err := l.Append(out(agentproto.FrameStdout, off, p)); err != nil {
			t.Fatal(err)
		}
	}
	x := exitFrame(t, 3)
	if err := l.Append(x); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != "abc"+string(x.Payload) {
			t.Fatalf("follower got %q", s)
		}
	case <-ctx.Done():
		t.Fatal("follower did not end at the exit frame")
	}
	// A follower past the end of a finished log returns at once.
	if err := l.Read(ctx, l.Size()+100, true, func(Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestExpiredSkipsOpenAndRecentLogs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := Open(dir)
	for _, id := range []string{"job_old", "job_new", "job_open"} {
		if _, err := s.Get(id, true); err != nil {
			t.Fatal(err)
		}
	}
	s.Release("job_old")
	s.Release("job_new")
	old := time.Now().Add(-48 * time.Hour)
	for _, id := range []string{"job_old", "job_open"} {
		if err := os.Chtimes(s.path(id), old, old); err != nil {
			t.Fatal(err)
		}
	}
	got := s.Expired(time.Now().Add(-24 * time.Hour))
	if len(got) != 1 || got[0] != "job_old" {
		t.Fatalf("expired = %v, want [job_old]", got)
	}
	if err := s.Remove("job_old"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("job_old", false); err == nil {
		t.Fatal("removed log still opens")
	}
}

func TestExitPayloadKeptAndRecovered(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := Open(dir)
	l, _ := s.Get("job_e", true)
	if l.ExitPayload() != nil {
		t.Fatal("exit payload before exit")
	}
	x := exitFrame(t, 7)
	if err := l.Append(out(agentproto.FrameStdout, 0, "a"), x); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(l.ExitPayload(), x.Payload) {
		t.Fatalf("exit payload %q", l.ExitPayload())
	}
	s.Release("job_e")
	s2, _ := Open(dir)
	l2, err := s2.Get("job_e", false)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(l2.ExitPayload(), x.Payload) {
		t.Fatalf("exit payload after reopen %q", l2.ExitPayload())
	}
}

// TestValidCursorWithIndex checks every event id of a log of many small and
// some large frames, and the positions next to them, on the live log and on
// a read-only view that rebuilt its index from the file.
func TestValidCursorWithIndex(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Get("job_idx", true)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var next [2]int64
	for i := 0; i < 12000; i++ {
		st := rng.IntN(2)
		n := 1 + rng.IntN(200)
		if i%1000 == 999 {
			n = 300 << 10 // now and then a frame larger than the index spacing
		}
		fr := agentproto.Frame{Type: agentproto.FrameStdout + agentproto.FrameType(st), Offset: next[st], Payload: make([]byte, n)}
		if err := l.Append(fr); err != nil {
			t.Fatal(err)
		}
		next[st] += int64(n)
	}
	if err := l.Append(exitFrame(t, 0)); err != nil {
		t.Fatal(err)
	}
	_, _, cursors, _ := collect(t, l, 0)
	s.Release("job_idx")
	view, err := s.View("job_idx")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.index) < 10 || len(view.index) != len(l.index) {
		t.Fatalf("index of %d entries live, %d in the view", len(l.index), len(view.index))
	}
	for _, lg := range []*Log{l, view} {
		for i, c := range cursors {
			if i%7 != 0 && i < len(cursors)-3 {
				continue
			}
			for _, d := range []int64{-1, 0, 1} {
				ok, err := lg.ValidCursor(c + d)
				want := d == 0 || c+d >= lg.Size()
				if err != nil || ok != want {
					t.Fatalf("ValidCursor(%d) = %v, %v; want %v", c+d, ok, err, want)
				}
			}
		}
	}
}

// TestAppendLargeFramesAllOrNothing appends frames above and below
// directWrite in one call, then a call whose last frame leaves a gap: the
// first reads back byte-exact, the second changes nothing, and the log
// continues where it ended (also after reopening the file).
func TestAppendLargeFramesAllOrNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := Open(dir)
	l, err := s.Get("job_big", true)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("0123456789abcdef", 3*directWrite/16+5)
	if err := l.Append(out(agentproto.FrameStdout, 0, "head "), out(agentproto.FrameStdout, 5, big),
		out(agentproto.FrameStderr, 0, "e"), out(agentproto.FrameStdout, int64(5+len(big)), " tail")); err != nil {
		t.Fatal(err)
	}
	size := l.Size()
	stdout := int64(5 + len(big) + 5)
	err = l.Append(out(agentproto.FrameStdout, stdout, big), out(agentproto.FrameStderr, 1, "ok"), out(agentproto.FrameStdout, stdout+int64(len(big))+1, "gap"))
	if err == nil {
		t.Fatal("gap accepted")
	}
	if so, se, _ := l.Offsets(); l.Size() != size || so != stdout || se != 1 {
		t.Fatalf("after the failed append: size %d offsets %d/%d; want %d, %d/1", l.Size(), so, se, size, stdout)
	}
	if err := l.Append(out(agentproto.FrameStdout, stdout, "!"), exitFrame(t, 0)); err != nil {
		t.Fatal(err)
	}
	want := "head " + big + " tail!"
	for _, view := range []bool{false, true} {
		lg := l
		if view {
			s.Release("job_big")
			if lg, err = s.View("job_big"); err != nil {
				t.Fatal(err)
			}
		}
		o, e, _, exit := collect(t, lg, 0)
		if string(o) != want || string(e) != "e" || !exit {
			t.Fatalf("view=%v: stdout %d bytes (equal: %v), stderr %q, exit %v", view, len(o), string(o) == want, e, exit)
		}
	}
}

// TestReaderMappedWindows follows a log that grows past one mapping window
// in frames of all sizes (a live reader: pread), then reads the finished
// log from the start and from a cursor in the first window through the
// mapping, across windows: every byte arrives once, in order, with its
// offset.
func TestReaderMappedWindows(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Get("job_mapped", true)
	if err != nil {
		t.Fatal(err)
	}
	const total = mapWindow + 5<<20
	at := func(o int64) byte { return byte(o % 251) }
	rng := rand.New(rand.NewPCG(4, 2))
	var cursors []int64
	check := func(next *int64) func(e Event) error {
		return func(e Event) error {
			if e.Type == agentproto.FrameExit {
				return nil
			}
			if e.Type != agentproto.FrameStdout || e.Offset != *next {
				t.Fatalf("event %v at %d, want stdout at %d", e.Type, e.Offset, *next)
			}
			for i, c := range e.Payload {
				if c != at(e.Offset+int64(i)) {
					t.Fatalf("byte at stdout offset %d is %d, want %d", e.Offset+int64(i), c, at(e.Offset+int64(i)))
				}
			}
			*next += int64(len(e.Payload))
			return nil
		}
	}
	live, err := l.NewReader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	var off, next int64
	for off < total {
		n := int64(1 + rng.IntN(64))
		if rng.IntN(3) > 0 {
			n = int64(1 + rng.IntN(agentproto.MaxFramePayload))
		}
		p := make([]byte, n)
		for i := range p {
			p[i] = at(off + int64(i))
		}
		if err := l.Append(agentproto.Frame{Type: agentproto.FrameStdout, Offset: off, Payload: p}); err != nil {
			t.Fatal(err)
		}
		off += n
		if rng.IntN(2) == 0 {
			continue // let some appends pile up for one read
		}
		if _, err := live.ReadAvailable(check(&next)); err != nil {
			t.Fatal(err)
		}
		if live.m != nil {
			t.Fatal("a live reader mapped the log")
		}
		cursors = append(cursors, live.Cursor())
	}
	if err := l.Append(exitFrame(t, 0)); err != nil {
		t.Fatal(err)
	}
	if exited, err := live.ReadAvailable(check(&next)); err != nil || !exited || next != off {
		t.Fatalf("live reader: exited %v, err %v, %d bytes; want the exit after %d", exited, err, next, off)
	}
	// The finished log, from the start and from a cursor in the first
	// window's last MiBs.
	var from int64
	for _, c := range cursors {
		if c < mapWindow-2<<20 {
			from = c
		}
	}
	var fromStdout int64
	_ = l.Read(context.Background(), 0, false, func(e Event) error {
		if e.Cursor <= from {
			fromStdout = e.Offset + int64(len(e.Payload))
		}
		return nil
	})
	for _, start := range [][2]int64{{0, 0}, {from, fromStdout}} {
		r, err := l.NewReader(start[0])
		if err != nil {
			t.Fatal(err)
		}
		stdout := start[1]
		exited, err := r.ReadAvailable(check(&stdout))
		if err != nil || !exited || stdout != off {
			t.Fatalf("from %d: exited %v, err %v, stdout to %d; want the exit after %d bytes", start[0], exited, err, stdout, off)
		}
		if r.m == nil || r.mOff < mapWindow {
			t.Fatalf("from %d: the reader's mapping %v at %d: it did not map the log into its second window", start[0], r.m != nil, r.mOff)
		}
		r.Close()
	}
}

// TestReaderMappedFaultIsError: a mapped page that cannot be read (here the
// file cut short under the reader, as an I/O error would leave it) fails
// the read with an error instead of crashing the process.
func TestReaderMappedFaultIsError(t *testing.T) {
	t.Parallel()
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, err := s.Get("job_fault", true)
	if err != nil {
		t.Fatal(err)
	}
	p := bytes.Repeat([]byte("x"), agentproto.MaxFramePayload)
	for i := range int64(4) {
		if err := l.Append(agentproto.Frame{Type: agentproto.FrameStdout, Offset: i * int64(len(p)), Payload: p}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Append(exitFrame(t, 0)); err != nil {
		t.Fatal(err)
	}
	r, err := l.NewReader(0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := os.Truncate(l.path, 4096); err != nil {
		t.Fatal(err)
	}
	var sum int
	_, err = r.ReadAvailable(func(e Event) error {
		for _, c := range e.Payload {
			sum += int(c)
		}
		return nil
	})
	if r.m == nil {
		t.Fatal("the reader did not map the log")
	}
	if err == nil || !strings.Contains(err.Error(), "fault") {
		t.Fatalf("read of a log cut under its mapping: %v, want a fault error", err)
	}
}
