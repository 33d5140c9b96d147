package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// TestJobStdin streams stdin into background jobs of real sandboxes under
// runc and runsc: a cat echoes what is written, in order, and exits 0 when
// stdin is closed (over PUT and over the attach WebSocket); sort over
// 64 MiB of streamed stdin gives the right sha256; `genesis exec -i` pipes
// the CLI's stdin; stdin to a job that did not ask for it or has ended is
// refused; and a sync exec's setsid'd child dies at the exec's timeout.
func TestJobStdin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "code-python-basic")
	svc := e.start(t)
	c := svc.client()
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: "low"})
			t.Run("put", func(t *testing.T) { testStdinPut(t, c, sb.ID) })
			t.Run("attach", func(t *testing.T) { testStdinAttach(t, c, sb.ID) })
			t.Run("sort-64MiB", func(t *testing.T) { testStdinSort(t, c, sb.ID) })
			t.Run("cli", func(t *testing.T) { testStdinCLI(t, svc, sb.ID) })
			t.Run("refusals", func(t *testing.T) { testStdinRefusals(t, c, sb.ID) })
			t.Run("exec-tree-timeout", func(t *testing.T) { testExecTreeTimeout(t, svc, sb.ID) })
		})
	}
}

// waitJob polls a job until it is final.
func waitJob(t *testing.T, c *client.Client, id string) *client.Job {
	t.Helper()
	var j *client.Job
	eventually(t, 60*time.Second, "job "+id+" ends", func() (bool, string) {
		var err error
		j, err = c.GetJob(context.Background(), id)
		if err != nil {
			return false, err.Error()
		}
		return j.State != "running" && j.State != "pending", j.State
	})
	return j
}

// jobStdout reads a finished job's whole stdout from its log.
func jobStdout(t *testing.T, c *client.Client, id string) string {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	err := c.StreamLogs(ctx, id, client.StreamOptions{Resume: true}, func(ev client.LogEvent) error {
		if ev.Event == "stdout" {
			out.Write(ev.Data)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("logs of %s: %v", id, err)
	}
	return out.String()
}

func testStdinPut(t *testing.T, c *client.Client, id string) {
	ctx := context.Background()
	j := startJob(t, c, id, client.ExecRequest{Command: []string{"cat"}, StdinStream: true})
	var want strings.Builder
	for i := range 20 {
		line := fmt.Sprintf("line %02d of the streamed stdin\n", i)
		want.WriteString(line)
		if n, err := c.WriteStdin(ctx, j.ID, strings.NewReader(line)); err != nil || n != int64(len(line)) {
			t.Fatalf("write %d: %d %v", i, n, err)
		}
	}
	if err := c.CloseStdin(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	// Closing again is fine.
	if err := c.CloseStdin(ctx, j.ID); err != nil {
		t.Errorf("second close: %v", err)
	}
	done := waitJob(t, c, j.ID)
	if done.State != "succeeded" || done.ExitCode == nil || *done.ExitCode != 0 {
		t.Fatalf("cat ended %s (%v): %+v", done.State, done.ExitCode, done)
	}
	if got := jobStdout(t, c, j.ID); got != want.String() {
		t.Errorf("cat echoed %q, want %q", got, want.String())
	}
}

func testStdinAttach(t *testing.T, c *client.Client, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	j := startJob(t, c, id, client.ExecRequest{Command: []string{"sh", "-c", "cat; echo done >&2"}, StdinStream: true})
	att, err := c.AttachJob(ctx, j.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer att.Close()
	if !att.HasStdin {
		t.Fatal("attach says the job has no stdin")
	}
	var stdout, stderr bytes.Buffer
	type result struct {
		x   *client.JobExit
		err error
	}
	res := make(chan result, 1)
	go func() { x, err := att.Pump(&stdout, &stderr); res <- result{x, err} }()
	for i := range 10 {
		if _, err := fmt.Fprintf(att, "msg-%d\n", i); err != nil {
			t.Fatal(err)
		}
	}
	if err := att.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.err != nil || r.x.ExitCode != 0 || r.x.ExitReason != "exited" {
		t.Fatalf("attach exit: %+v %v", r.x, r.err)
	}
	var want strings.Builder
	for i := range 10 {
		fmt.Fprintf(&want, "msg-%d\n", i)
	}
	if stdout.String() != want.String() || stderr.String() != "done\n" {
		t.Errorf("attach output: stdout %q stderr %q", stdout.String(), stderr.String())
	}
}

func testStdinSort(t *testing.T, c *client.Client, id string) {
	// 64 MiB of random lines, made here; their sorted sha256 is the answer.
	rng := rand.New(rand.NewPCG(1, 2))
	var lines []string
	size := 0
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	for size < 64<<20 {
		n := 20 + rng.IntN(80)
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		lines = append(lines, string(b)+"\n")
		size += n + 1
	}
	input := strings.Join(lines, "")
	slices.Sort(lines)
	sum := sha256.Sum256([]byte(strings.Join(lines, "")))
	want := hex.EncodeToString(sum[:])

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	j := startJob(t, c, id, client.ExecRequest{Script: "LC_ALL=C sort | sha256sum", StdinStream: true, TimeoutMS: 300_000})
	n, err := c.WriteStdin(ctx, j.ID, strings.NewReader(input))
	if err != nil || n != int64(len(input)) {
		t.Fatalf("streamed %d of %d bytes: %v", n, len(input), err)
	}
	if err := c.CloseStdin(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	done := waitJob(t, c, j.ID)
	got := strings.Fields(jobStdout(t, c, j.ID))
	if done.State != "succeeded" || len(got) == 0 || got[0] != want {
		t.Fatalf("sort of %d MiB: %s, sha256 %v, want %s", len(input)>>20, done.State, got, want)
	}
}

func testStdinCLI(t *testing.T, svc *service, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "genesis"), "exec", "-i", id, "--", "sh", "-c", "tr a-z A-Z; exit 3")
	cmd.Env = append(os.Environ(), client.EnvURL+"="+svc.url(), client.EnvAPIKey+"="+svc.e.apiKey)
	cmd.Stdin = strings.NewReader("hello from the cli\nsecond line\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != 3 || stdout.String() != "HELLO FROM THE CLI\nSECOND LINE\n" {
		t.Errorf("genesis exec -i: exit %d stdout %q stderr %q", code, stdout.String(), stderr.String())
	}
}

func testStdinRefusals(t *testing.T, c *client.Client, id string) {
	ctx := context.Background()
	// A job without streamed stdin.
	j := startJob(t, c, id, client.ExecRequest{Command: []string{"sleep", "30"}})
	if _, err := c.WriteStdin(ctx, j.ID, strings.NewReader("x")); client.ErrorCode(err) != "stdin_not_streamed" {
		t.Errorf("stdin to a job without it: %v", err)
	}
	if _, err := c.CancelJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	// An ended job.
	j = startJob(t, c, id, client.ExecRequest{Command: []string{"true"}, StdinStream: true})
	// true does not read stdin; close it so the job surely ends.
	_ = c.CloseStdin(ctx, j.ID)
	waitJob(t, c, j.ID)
	if _, err := c.WriteStdin(ctx, j.ID, strings.NewReader("x")); client.ErrorCode(err) != "job_not_running" {
		t.Errorf("stdin to an ended job: %v", err)
	}
	// A sync exec cannot stream stdin.
	if _, err := c.Exec(ctx, id, client.ExecRequest{Command: []string{"cat"}, StdinStream: true}); client.ErrorCode(err) != "stdin_stream_needs_background" {
		t.Errorf("sync exec with stdin_stream: %v", err)
	}
	if _, err := c.WriteStdin(ctx, "job_nosuchjob000000", strings.NewReader("x")); !client.IsNotFound(err) {
		t.Errorf("stdin to an unknown job: %v", err)
	}
}

// testExecTreeTimeout: a sync exec's descendants that left its process
// group and session die with it at its timeout.
func testExecTreeTimeout(t *testing.T, svc *service, id string) {
	r := svc.cli(t, "exec", "--timeout", "1s", id, "--", "sh", "-c", "setsid sleep 1000 & sleep 1000")
	if r.code != 124 { // timeout(1)'s status, as the CLI reports a timed-out job
		t.Fatalf("exec with a timeout: %s", r)
	}
	eventually(t, 10*time.Second, "no sleep is left in the sandbox", func() (bool, string) {
		names := processNames(t, svc.client(), id)
		return !slices.Contains(names, "sleep"), strings.Join(names, " ")
	})
}
