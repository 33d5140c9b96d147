package agent_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// waitStdout polls the job until its stdout holds at least n bytes.
func waitStdout(t *testing.T, c *agentclient.Client, id string, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := c.JobInfo(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if info.StdoutBytes >= n {
			return
		}
		if time.Now().After(deadline) || !info.Running {
			t.Fatalf("job %s: stdout %d bytes, want %d (running %v)", id, info.StdoutBytes, n, info.Running)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func openStdin(t *testing.T, c *agentclient.Client, id string) io.WriteCloser {
	t.Helper()
	w, err := c.OpenStdin(context.Background(), id)
	if err != nil {
		t.Fatalf("OpenStdin(%s): %v", id, err)
	}
	return w
}

// testStdinCat streams into cat: each piece comes back before the next is
// written (live, in order), a second stream appends, and closing stdin
// ends cat with 0.
func testStdinCat(t *testing.T, c *agentclient.Client) {
	info := mustStart(t, c, agentproto.ExecRequest{JobID: "cat", Command: []string{"cat"}, StdinStream: true})
	if !info.StdinOpen {
		t.Errorf("JobInfo of a job with a streamed stdin: StdinOpen false")
	}
	var want bytes.Buffer
	for round := range 2 { // the second stream appends to the first
		w := openStdin(t, c, "cat")
		for i := range 20 {
			piece := fmt.Sprintf("round %d piece %d\n", round, i)
			if _, err := io.WriteString(w, piece); err != nil {
				t.Fatal(err)
			}
			want.WriteString(piece)
			waitStdout(t, c, "cat", int64(want.Len()))
		}
		if err := w.Close(); err != nil {
			t.Fatalf("close stream %d: %v", round, err)
		}
	}
	if info, err := c.JobInfo(context.Background(), "cat"); err != nil || !info.Running {
		t.Fatalf("after the streams ended the job must still run: %+v %v", info, err)
	}
	if err := c.CloseStdin(context.Background(), "cat"); err != nil {
		t.Fatal(err)
	}
	out := mustStream(t, c, "cat", 0, 0)
	if out.exit.ExitCode != 0 || out.exit.ExitReason != agentproto.ExitReasonExited {
		t.Fatalf("cat ended %+v, want exit 0", out.exit)
	}
	if !bytes.Equal(out.stdout, want.Bytes()) {
		t.Fatalf("cat wrote %q, want %q", out.stdout, want.Bytes())
	}
	if err := c.CloseStdin(context.Background(), "cat"); err != nil {
		t.Errorf("closing the stdin of a finished job again: %v", err)
	}
	if info, _ := c.JobInfo(context.Background(), "cat"); info.StdinOpen {
		t.Errorf("finished job still reports an open stdin")
	}
}

func TestJobStdinCat(t *testing.T) {
	t.Parallel()
	testStdinCat(t, startAgent(t).client)
}

// TestJobStdinSortBig streams 64 MiB of lines into sort and checks its
// output against sorting in Go.
func TestJobStdinSortBig(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	// Lines of 24 hex digits, made and sorted without a string per line
	// (the race detector makes per-line work slow).
	const size, width = 64 << 20, 25
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, (size+width-1)/width*width)
	const hex = "0123456789abcdef"
	for i := 0; i < len(data); i += width {
		v, u := rng.Uint64(), rng.Uint64()
		for k := range 16 {
			data[i+k] = hex[v>>(4*k)&15]
		}
		for k := 16; k < width-1; k++ {
			data[i+k] = hex[u>>(4*k)&15]
		}
		data[i+width-1] = '\n'
	}
	lines := make([][]byte, 0, len(data)/width)
	for i := 0; i < len(data); i += width {
		lines = append(lines, data[i:i+width])
	}
	slices.SortFunc(lines, bytes.Compare)
	h := sha256.New()
	for _, l := range lines {
		h.Write(l)
	}
	var want [32]byte
	h.Sum(want[:0])

	mustStart(t, a.client, agentproto.ExecRequest{
		JobID: "sort", Command: []string{"sort"}, Env: map[string]string{"LC_ALL": "C"},
		StdinStream: true, MaxOutputBytes: 2 * size,
	})
	w := openStdin(t, a.client, "sort")
	start := time.Now()
	for b := data; len(b) > 0; {
		n := min(len(b), 1<<20)
		if _, err := w.Write(b[:n]); err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	if err := a.client.CloseStdin(context.Background(), "sort"); err != nil {
		t.Fatal(err)
	}
	out := mustStream(t, a.client, "sort", 0, 0)
	if out.exit.ExitCode != 0 {
		t.Fatalf("sort: %+v\n%s", out.exit, out.stderr)
	}
	if got := sha256.Sum256(out.stdout); got != want {
		t.Fatalf("sort output: %d bytes, sha256 %x; want %d bytes, %x", len(out.stdout), got, len(data), want)
	}
	t.Logf("streamed %.1f MiB into stdin in %v (%.0f MiB/s)", float64(len(data))/(1<<20), el, float64(len(data))/(1<<20)/el.Seconds())
}

func TestJobStdinErrors(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	c := a.client
	ctx := context.Background()
	wantCode := func(what string, err error, class error, code string) {
		t.Helper()
		if !errors.Is(err, class) || errdefs.Code(err) != code {
			t.Errorf("%s: %v (code %q), want %v with code %q", what, err, errdefs.Code(err), class, code)
		}
	}

	// A job that did not ask for a streamed stdin.
	mustStart(t, c, agentproto.ExecRequest{JobID: "plain", Command: []string{"sleep", "30"}})
	_, err := c.OpenStdin(ctx, "plain")
	wantCode("stdin of a plain job", err, errdefs.ErrFailedPrecondition, agentproto.CodeStdinNotStreamed)
	wantCode("close stdin of a plain job", c.CloseStdin(ctx, "plain"), errdefs.ErrFailedPrecondition, agentproto.CodeStdinNotStreamed)

	// A finished job.
	mustStart(t, c, agentproto.ExecRequest{JobID: "done", Command: []string{"true"}, StdinStream: true})
	mustStream(t, c, "done", 0, 0)
	_, err = c.OpenStdin(ctx, "done")
	wantCode("stdin of a finished job", err, errdefs.ErrFailedPrecondition, agentproto.CodeJobNotRunning)
	if err := c.CloseStdin(ctx, "done"); err != nil {
		t.Errorf("close stdin of a finished job: %v", err)
	}

	// An unknown job.
	if _, err := c.OpenStdin(ctx, "nobody"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("stdin of an unknown job: %v", err)
	}

	// One writer at a time.
	mustStart(t, c, agentproto.ExecRequest{JobID: "busy", Command: []string{"cat"}, StdinStream: true})
	w1 := openStdin(t, c, "busy")
	_, err = c.OpenStdin(ctx, "busy")
	wantCode("second writer", err, errdefs.ErrConflict, agentproto.CodeStdinBusy)
	if err := w1.Close(); err != nil {
		t.Fatal(err)
	}
	w3 := openStdin(t, c, "busy")
	w3.Close()

	// A closed stdin of a running job.
	mustStart(t, c, agentproto.ExecRequest{JobID: "closed", Command: []string{"sleep", "30"}, StdinStream: true})
	if err := c.CloseStdin(ctx, "closed"); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseStdin(ctx, "closed"); err != nil {
		t.Errorf("second CloseStdin: %v", err)
	}
	_, err = c.OpenStdin(ctx, "closed")
	wantCode("stdin after close", err, errdefs.ErrFailedPrecondition, agentproto.CodeStdinClosed)

	// The job ends while the stream is open: writes fail, Close says why.
	mustStart(t, c, agentproto.ExecRequest{JobID: "head", Command: []string{"head", "-c", "10"}, StdinStream: true})
	w := openStdin(t, c, "head")
	chunk := make([]byte, 64<<10)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := w.Write(chunk); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("writes into the stdin of an ended job still succeed")
		}
	}
	err = w.Close()
	if code := errdefs.Code(err); !errors.Is(err, errdefs.ErrFailedPrecondition) || code != agentproto.CodeJobNotRunning && code != agentproto.CodeStdinClosed {
		t.Errorf("stream into a job that ended: %v (code %q)", err, code)
	}

	// Bad requests.
	if _, err := c.Exec(ctx, agentproto.ExecRequest{Command: []string{"cat"}, StdinStream: true}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("sync exec with stdin_stream: %v", err)
	}
	_, err = c.StartJob(ctx, agentproto.JobStartRequest{ExecRequest: agentproto.ExecRequest{
		JobID: "both", Command: []string{"cat"}, StdinStream: true, Stdin: []byte("x"),
	}})
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("stdin and stdin_stream: %v", err)
	}
	for _, id := range []string{"plain", "busy", "closed"} {
		c.CancelJob(ctx, id, 0)
	}
}

// TestJobStdinWriterGoneFreesIt: a caller that goes away while its write is
// blocked (the process reads nothing) does not keep the writer.
func TestJobStdinWriterGoneFreesIt(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	mustStart(t, a.client, agentproto.ExecRequest{JobID: "idle", Command: []string{"sleep", "30"}, StdinStream: true})
	ctx, cancel := context.WithCancel(context.Background())
	w, err := a.client.OpenStdin(ctx, "idle")
	if err != nil {
		t.Fatal(err)
	}
	werr := make(chan error, 1)
	go func() {
		_, err := w.Write(make([]byte, 32<<20)) // far beyond the pipe and the stream window
		werr <- err
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := <-werr; err == nil {
		t.Fatal("write of a canceled stream succeeded")
	}
	w.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		w2, err := a.client.OpenStdin(context.Background(), "idle")
		if err == nil {
			w2.Close()
			break
		}
		if errdefs.Code(err) != agentproto.CodeStdinBusy || time.Now().After(deadline) {
			t.Fatalf("OpenStdin after the first writer went away: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	a.client.CancelJob(context.Background(), "idle", 0)
}
