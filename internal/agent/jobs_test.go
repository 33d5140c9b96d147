package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// jobOutput is what one stream of a job delivered.
type jobOutput struct {
	stdout, stderr []byte
	order          []agentproto.FrameType // type of every frame, in order
	truncAt        [2]int64               // offset of the stdout/stderr truncation frame, -1 if none
	exit           agentproto.ExitResult
	frames         int
	maxPayload     int
}

// streamJob reads a job's stream from (so, se) until the exit frame and
// checks the framing: output frames continue their stream exactly, a
// truncation frame comes once per stream at its end, the exit frame last.
func streamJob(ctx context.Context, c *agentclient.Client, id string, so, se int64) (jobOutput, error) {
	out := jobOutput{truncAt: [2]int64{-1, -1}}
	next := [2]int64{so, se}
	sawExit := false
	err := c.StreamJob(ctx, id, so, se, func(fr agentproto.Frame) error {
		if sawExit {
			return errors.New("frame after the exit frame")
		}
		out.frames++
		out.order = append(out.order, fr.Type)
		out.maxPayload = max(out.maxPayload, len(fr.Payload))
		switch fr.Type {
		case agentproto.FrameStdout, agentproto.FrameStderr:
			i := int(fr.Type) - 1
			if out.truncAt[i] >= 0 {
				return fmt.Errorf("stream %d: output after its truncation frame", i)
			}
			if fr.Offset != next[i] {
				return fmt.Errorf("stream %d: frame at offset %d, want %d", i, fr.Offset, next[i])
			}
			if len(fr.Payload) == 0 {
				return fmt.Errorf("stream %d: empty frame", i)
			}
			next[i] += int64(len(fr.Payload))
			if i == 0 {
				out.stdout = append(out.stdout, fr.Payload...)
			} else {
				out.stderr = append(out.stderr, fr.Payload...)
			}
		case agentproto.FrameTruncated:
			if len(fr.Payload) != 1 || fr.Payload[0] < 1 || fr.Payload[0] > 2 {
				return fmt.Errorf("truncation frame payload %v", fr.Payload)
			}
			i := int(fr.Payload[0]) - 1
			if out.truncAt[i] >= 0 {
				return fmt.Errorf("stream %d truncated twice", i)
			}
			if fr.Offset != next[i] {
				return fmt.Errorf("stream %d truncated at %d, but %d bytes were sent", i, fr.Offset, next[i])
			}
			out.truncAt[i] = fr.Offset
		case agentproto.FrameExit:
			sawExit = true
			if err := json.Unmarshal(fr.Payload, &out.exit); err != nil {
				return fmt.Errorf("exit frame: %v", err)
			}
		}
		return nil
	})
	if err == nil && !sawExit {
		err = errors.New("StreamJob returned nil without an exit frame")
	}
	return out, err
}

func mustStart(t *testing.T, c *agentclient.Client, req agentproto.ExecRequest) agentproto.JobInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	info, err := c.StartJob(ctx, agentproto.JobStartRequest{ExecRequest: req})
	if err != nil {
		t.Fatalf("StartJob(%s): %v", req.JobID, err)
	}
	if info.JobID != req.JobID {
		t.Fatalf("StartJob answered job %q, want %q", info.JobID, req.JobID)
	}
	return info
}

func mustStream(t *testing.T, c *agentclient.Client, id string, so, se int64) jobOutput {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	out, err := streamJob(ctx, c, id, so, se)
	if err != nil {
		t.Fatalf("stream %s from %d/%d: %v", id, so, se, err)
	}
	return out
}

// randomFiles writes n chunk files of random sizes for each stream under
// dir and returns the concatenated contents, plus a script that writes
// them interleaved (stdout chunk, stderr chunk, ...), sleeping between
// chunks when pause is set.
func randomFiles(t *testing.T, dir string, n int, pause string) (stdout, stderr []byte, script string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(n), 42))
	var sb strings.Builder
	for i := range n {
		for s, name := range []string{"o", "e"} {
			b := make([]byte, 1+rng.IntN(20000))
			for k := range b {
				b[k] = byte(rng.Uint32())
			}
			p := filepath.Join(dir, fmt.Sprintf("%s%d", name, i))
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			if s == 0 {
				stdout = append(stdout, b...)
				fmt.Fprintf(&sb, "cat %s; ", p)
			} else {
				stderr = append(stderr, b...)
				fmt.Fprintf(&sb, "cat %s >&2; ", p)
			}
		}
		if pause != "" {
			fmt.Fprintf(&sb, "sleep %s; ", pause)
		}
	}
	return stdout, stderr, sb.String()
}

func TestJobStartStreamExit(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	ctx, cancel := context.WithCancel(context.Background())
	info, err := a.client.StartJob(ctx, agentproto.JobStartRequest{ExecRequest: agentproto.ExecRequest{
		JobID: "basic", Script: `echo "out $X"; echo err >&2; sleep 0.2; printf tail; exit 3`, Env: map[string]string{"X": "1"},
	}})
	cancel() // the job is detached from the request that started it
	if err != nil {
		t.Fatal(err)
	}
	if !info.Running || info.PID <= 0 || info.Exit != nil {
		t.Fatalf("start info %+v", info)
	}
	out := mustStream(t, a.client, "basic", 0, 0)
	if string(out.stdout) != "out 1\ntail" || string(out.stderr) != "err\n" {
		t.Errorf("stdout %q stderr %q", out.stdout, out.stderr)
	}
	x := out.exit
	if x.ExitCode != 3 || x.ExitReason != "exited" || x.StdoutBytes != 10 || x.StderrBytes != 4 || x.StdoutTruncated || x.DurationMS < 200 {
		t.Errorf("exit %+v", x)
	}
	got, err := a.client.JobInfo(context.Background(), "basic")
	if err != nil || got.Running || got.Exit == nil || *got.Exit != x || got.PID != info.PID || got.StdoutBytes != 10 {
		t.Errorf("JobInfo after exit = %+v, %v; want the exit %+v", got, err, x)
	}
	// A finished job streams everything at once again, and an offset
	// beyond the end starts from the end.
	again := mustStream(t, a.client, "basic", 0, 0)
	if !bytes.Equal(again.stdout, out.stdout) || !bytes.Equal(again.stderr, out.stderr) || again.exit != x {
		t.Errorf("second stream differs: %+v", again)
	}
	end := mustStream(t, a.client, "basic", 1000, 2)
	if len(end.stdout) != 0 || string(end.stderr) != "r\n" || end.exit != x {
		t.Errorf("stream from 1000/2: %q %q %+v", end.stdout, end.stderr, end.exit)
	}
	waitNoProcs(t, "processes of the job", 5*time.Second, func(p procInfo) bool { return p.pgrp == info.PID })

	// Stdin is fed to the job; agent-internal variables do not reach it.
	in := bytes.Repeat([]byte("stdin\x00"), 200000)
	mustStart(t, a.client, agentproto.ExecRequest{
		JobID: "stdin", Script: `wc -c; echo "[$GENESIS_AGENT_LOG_LEVEL$GENESIS_AGENT_SHIM]"`, Stdin: in,
		Env: map[string]string{"GENESIS_AGENT_LOG_LEVEL": "bogus", "GENESIS_AGENT_SHIM": "0"},
	})
	sin := mustStream(t, a.client, "stdin", 0, 0)
	if want := fmt.Sprintf("%d\n[]\n", len(in)); strings.TrimLeft(string(sin.stdout), " ") != want || sin.exit.ExitCode != 0 {
		t.Errorf("stdin job: %q %q %+v, want %q", sin.stdout, sin.stderr, sin.exit, want)
	}
}

func TestJobStreamResumeFromAnyOffset(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	wantOut, wantErr, script := randomFiles(t, t.TempDir(), 40, "")
	mustStart(t, a.client, agentproto.ExecRequest{JobID: "resume", Script: script})
	full := mustStream(t, a.client, "resume", 0, 0)
	if !bytes.Equal(full.stdout, wantOut) || !bytes.Equal(full.stderr, wantErr) {
		t.Fatalf("full stream: %d/%d bytes, want %d/%d (equal: %v %v)", len(full.stdout), len(full.stderr),
			len(wantOut), len(wantErr), bytes.Equal(full.stdout, wantOut), bytes.Equal(full.stderr, wantErr))
	}
	if full.exit.StdoutBytes != int64(len(wantOut)) || full.exit.StderrBytes != int64(len(wantErr)) || full.exit.ExitCode != 0 {
		t.Fatalf("exit %+v", full.exit)
	}
	// A frame holds the output that was there when the reader came for it
	// (streamFrame): how much that is depends on timing, its bound not.
	if full.maxPayload > agentproto.MaxFramePayload {
		t.Errorf("frame payload of %d bytes, want at most %d", full.maxPayload, agentproto.MaxFramePayload)
	}
	// Both streams really are interleaved in the frame order.
	switches := 0
	for i := 1; i < len(full.order)-1; i++ {
		if full.order[i] != full.order[i-1] {
			switches++
		}
	}
	if switches < 10 {
		t.Errorf("only %d stream switches in %d frames: arrival order lost", switches, len(full.order))
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for range 25 {
		so, se := rng.Int64N(int64(len(wantOut))+1), rng.Int64N(int64(len(wantErr))+1)
		got := mustStream(t, a.client, "resume", so, se)
		if !bytes.Equal(got.stdout, wantOut[so:]) || !bytes.Equal(got.stderr, wantErr[se:]) {
			t.Fatalf("from %d/%d: got %d/%d bytes, want exactly the remaining %d/%d", so, se,
				len(got.stdout), len(got.stderr), len(wantOut)-int(so), len(wantErr)-int(se))
		}
		if got.exit != full.exit {
			t.Fatalf("from %d/%d: exit %+v, want %+v", so, se, got.exit, full.exit)
		}
	}
}

func TestJobStreamDisconnectAndResume(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	wantOut, wantErr, script := randomFiles(t, t.TempDir(), 60, "0.01")
	mustStart(t, a.client, agentproto.ExecRequest{JobID: "live", Script: script})
	var gotOut, gotErr []byte
	for attempt := 0; ; attempt++ {
		if attempt > 200 {
			t.Fatal("too many reconnects")
		}
		ctx, cancel := context.WithCancel(context.Background())
		limit := 30000 + attempt*5000
		n := 0
		done := false
		err := a.client.StreamJob(ctx, "live", int64(len(gotOut)), int64(len(gotErr)), func(fr agentproto.Frame) error {
			switch fr.Type {
			case agentproto.FrameStdout:
				if fr.Offset != int64(len(gotOut)) {
					return fmt.Errorf("stdout frame at %d, have %d", fr.Offset, len(gotOut))
				}
				gotOut = append(gotOut, fr.Payload...)
			case agentproto.FrameStderr:
				if fr.Offset != int64(len(gotErr)) {
					return fmt.Errorf("stderr frame at %d, have %d", fr.Offset, len(gotErr))
				}
				gotErr = append(gotErr, fr.Payload...)
			case agentproto.FrameExit:
				done = true
				return nil
			}
			n += len(fr.Payload)
			if n >= limit && attempt < 6 {
				cancel() // drop the connection mid-stream
			}
			return nil
		})
		cancel()
		if done {
			if err != nil {
				t.Fatalf("exit frame delivered but StreamJob = %v", err)
			}
			break
		}
		if !errors.Is(err, context.Canceled) || !errors.Is(err, errdefs.ErrUnavailable) {
			t.Fatalf("dropped stream: err = %v, want canceled and ErrUnavailable", err)
		}
		if attempt == 0 {
			// The job keeps running without any reader.
			info, err := a.client.JobInfo(context.Background(), "live")
			if err != nil || !info.Running {
				t.Fatalf("after disconnect: %+v %v", info, err)
			}
		}
	}
	if !bytes.Equal(gotOut, wantOut) || !bytes.Equal(gotErr, wantErr) {
		t.Fatalf("resumed output %d/%d bytes, want %d/%d (equal %v %v)", len(gotOut), len(gotErr), len(wantOut), len(wantErr),
			bytes.Equal(gotOut, wantOut), bytes.Equal(gotErr, wantErr))
	}
}

// vmHWM returns the peak resident set size of pid.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

func TestJobOutputCapKeepsMemoryBounded(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	const capBytes = 1 << 20
	total := int64(100 << 20)
	if !testing.Short() {
		total = 1 << 30
	}
	start := time.Now()
	mustStart(t, a.client, agentproto.ExecRequest{
		JobID:          "big",
		Script:         fmt.Sprintf("head -c %d /dev/zero; head -c 3000000 /dev/zero >&2; echo done >&2", total),
		MaxOutputBytes: capBytes,
	})
	out := mustStream(t, a.client, "big", 0, 0)
	el := time.Since(start)
	if len(out.stdout) != capBytes || len(out.stderr) != capBytes {
		t.Errorf("kept %d/%d bytes, want %d each", len(out.stdout), len(out.stderr), capBytes)
	}
	if out.truncAt != [2]int64{capBytes, capBytes} {
		t.Errorf("truncation frames at %v, want both at %d", out.truncAt, capBytes)
	}
	x := out.exit
	if x.ExitCode != 0 || x.StdoutBytes != total || x.StderrBytes != 3000005 || !x.StdoutTruncated || !x.StderrTruncated {
		t.Errorf("exit %+v, want %d/3000005 bytes, both truncated", x, total)
	}
	// A resumed stream repeats a truncation frame only if it delivers the
	// stream's last kept bytes again.
	end := mustStream(t, a.client, "big", capBytes, capBytes+5)
	if end.truncAt != [2]int64{-1, -1} || end.frames != 1 || end.exit != x {
		t.Errorf("resumed at the caps: %d frames, truncation %v, exit %+v", end.frames, end.truncAt, end.exit)
	}
	tail := mustStream(t, a.client, "big", capBytes-10, capBytes)
	if len(tail.stdout) != 10 || tail.truncAt != [2]int64{capBytes, -1} {
		t.Errorf("resumed 10 bytes before the stdout cap: %d bytes, truncation %v", len(tail.stdout), tail.truncAt)
	}
	hwm := vmHWM(t, a.pid())
	t.Logf("%d MiB through a 1 MiB cap in %v (%.0f MiB/s); agent peak RSS %.1f MiB",
		total>>20, el.Round(time.Millisecond), float64(total>>20)/el.Seconds(), float64(hwm)/(1<<20))
	if hwm > 64<<20 {
		t.Errorf("agent peak RSS %d MiB: output beyond the cap is not discarded", hwm>>20)
	}
}

// escapeScript starts a tree that a process group kill cannot end: a
// TERM-ignoring sleeper in its own session, a double-forked sleeper
// reparented away from the job, and the main shell. Each writes its pid.
func escapeScript(dir string) string {
	return fmt.Sprintf(`echo $$ > %[1]s/main.tmp; mv %[1]s/main.tmp %[1]s/main
setsid sh -c 'trap "" TERM; echo $$ > %[1]s/session.tmp; mv %[1]s/session.tmp %[1]s/session; exec sleep 1000' </dev/null &
sh -c 'sleep 1000 & echo $! > %[1]s/orphan.tmp; mv %[1]s/orphan.tmp %[1]s/orphan'
sleep 1000; echo never`, dir)
}

// waitPIDs waits for the pid files of escapeScript and returns the pids.
func waitPIDs(t *testing.T, dir string, names ...string) []int {
	t.Helper()
	var pids []int
	for _, n := range names {
		p := filepath.Join(dir, n)
		deadline := time.Now().Add(30 * time.Second)
		for {
			b, err := os.ReadFile(p)
			if err == nil {
				pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
				if err != nil {
					t.Fatal(err)
				}
				pids = append(pids, pid)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not appear", p)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return pids
}

// checkEscaped verifies the tree really escaped the job's group.
func checkEscaped(t *testing.T, main, session, orphan int) {
	t.Helper()
	pm, ok1 := readProc(main)
	ps, ok2 := readProc(session)
	po, ok3 := readProc(orphan)
	if !ok1 || !ok2 || !ok3 {
		t.Fatalf("tree not running: %v %v %v", ok1, ok2, ok3)
	}
	if ps.pgrp == pm.pgrp {
		t.Errorf("setsid child still in the job's group %d", pm.pgrp)
	}
	if po.ppid == main {
		t.Errorf("double-forked child still a child of the main shell")
	}
}

func waitGone(t *testing.T, within time.Duration, pids ...int) {
	t.Helper()
	waitNoProcs(t, "processes of the job", within, func(p procInfo) bool {
		for _, pid := range pids {
			if p.pid == pid {
				return true
			}
		}
		return false
	})
}

func TestJobCancelKillsEscapedTree(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	for _, grace := range []time.Duration{300 * time.Millisecond, 0} {
		t.Run(fmt.Sprintf("grace=%v", grace), func(t *testing.T) {
			dir := t.TempDir()
			id := fmt.Sprintf("cancel-%d", grace.Milliseconds())
			info := mustStart(t, a.client, agentproto.ExecRequest{JobID: id, Script: escapeScript(dir)})
			pids := waitPIDs(t, dir, "main", "session", "orphan")
			if pids[0] != info.PID {
				t.Errorf("JobInfo pid %d, the main shell is %d", info.PID, pids[0])
			}
			checkEscaped(t, pids[0], pids[1], pids[2])
			start := time.Now()
			if err := a.client.CancelJob(context.Background(), id, grace); err != nil {
				t.Fatal(err)
			}
			out := mustStream(t, a.client, id, 0, 0)
			el := time.Since(start)
			wantSig := "SIGTERM"
			if grace == 0 {
				wantSig = "SIGKILL"
			}
			if out.exit.ExitReason != "canceled" || out.exit.Signal != wantSig || len(out.stdout) != 0 {
				t.Errorf("exit %+v stdout %q, want canceled by %s", out.exit, out.stdout, wantSig)
			}
			if el < grace {
				t.Errorf("job ended after %v, before the grace of %v ran out (the TERM-ignoring process must need SIGKILL)", el, grace)
			}
			waitGone(t, time.Second, pids...) // already gone when the exit arrives
			// Canceling again is harmless.
			if err := a.client.CancelJob(context.Background(), id, 0); err != nil {
				t.Errorf("second cancel: %v", err)
			}
		})
	}
}

func TestJobTimeoutKillsEscapedTree(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	dir := t.TempDir()
	mustStart(t, a.client, agentproto.ExecRequest{JobID: "timeout", Script: escapeScript(dir), TimeoutMS: 1500, KillGraceMS: 200})
	pids := waitPIDs(t, dir, "main", "session", "orphan")
	checkEscaped(t, pids[0], pids[1], pids[2])
	out := mustStream(t, a.client, "timeout", 0, 0)
	if out.exit.ExitReason != "timeout" || out.exit.Signal != "SIGTERM" || out.exit.DurationMS < 1500 {
		t.Errorf("exit %+v, want timeout after 1.5 s", out.exit)
	}
	waitGone(t, time.Second, pids...)
}

func TestJobExitLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	dir := t.TempDir()
	start := time.Now()
	mustStart(t, a.client, agentproto.ExecRequest{JobID: "leftovers", Script: fmt.Sprintf(
		`setsid sh -c 'echo $$ > %[1]s/session; exec sleep 1000' & sh -c 'sleep 1000 & echo $! > %[1]s/orphan'; sleep 0.3; echo done`, dir)})
	out := mustStream(t, a.client, "leftovers", 0, 0)
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("job took %v: the exit waited for escaped pipes", el)
	}
	if string(out.stdout) != "done\n" || out.exit.ExitReason != "exited" || out.exit.ExitCode != 0 {
		t.Errorf("result %q %+v", out.stdout, out.exit)
	}
	waitGone(t, time.Second, waitPIDs(t, dir, "session", "orphan")...)
}

func TestJobInfoListForget(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	ctx := context.Background()
	c := a.client
	mustStart(t, c, agentproto.ExecRequest{JobID: "slow", Script: "sleep 30"})
	mustStart(t, c, agentproto.ExecRequest{JobID: "quick", Command: []string{"echo", "hi"}})
	mustStart(t, c, agentproto.ExecRequest{JobID: "missing", Command: []string{"no-such-command-xyz"}})

	if _, err := c.StartJob(ctx, agentproto.JobStartRequest{ExecRequest: agentproto.ExecRequest{JobID: "slow", Script: "true"}}); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("duplicate id: %v, want ErrConflict", err)
	}
	for name, req := range map[string]agentproto.ExecRequest{
		"no id":      {Script: "true"},
		"slash":      {JobID: "a/b", Script: "true"},
		"dots":       {JobID: "..", Script: "true"},
		"both":       {JobID: "x1", Command: []string{"true"}, Script: "true"},
		"neither":    {JobID: "x2"},
		"cap":        {JobID: "x3", Script: "true", MaxOutputBytes: 1 << 40},
		"neg cap":    {JobID: "x4", Script: "true", MaxOutputBytes: -1},
		"bad env":    {JobID: "x5", Script: "true", Env: map[string]string{"A=B": "c"}},
		"neg timout": {JobID: "x6", Script: "true", TimeoutMS: -1},
	} {
		if _, err := c.StartJob(ctx, agentproto.JobStartRequest{ExecRequest: req}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, err := c.JobInfo(ctx, "x3"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("rejected job is known: %v", err)
	}

	missing := mustStream(t, c, "missing", 0, 0)
	if missing.exit.ExitCode != 127 || !strings.Contains(string(missing.stderr), "command not found") {
		t.Errorf("missing command: %+v %q", missing.exit, missing.stderr)
	}
	if quick := mustStream(t, c, "quick", 0, 0); string(quick.stdout) != "hi\n" {
		t.Errorf("quick: %q", quick.stdout)
	}
	list, err := c.ListJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	state := map[string]bool{}
	for _, in := range list {
		state[in.JobID] = in.Running
	}
	if len(list) != 3 || !state["slow"] || state["quick"] || state["missing"] {
		t.Errorf("list %+v", list)
	}

	if err := c.ForgetJob(ctx, "slow"); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("forget running job: %v, want ErrConflict", err)
	}
	if err := c.ForgetJob(ctx, "quick"); err != nil {
		t.Errorf("forget: %v", err)
	}
	for _, call := range []func() error{
		func() error { _, err := c.JobInfo(ctx, "quick"); return err },
		func() error { return c.ForgetJob(ctx, "quick") },
		func() error { return c.CancelJob(ctx, "quick", 0) },
		func() error { return c.StreamJob(ctx, "quick", 0, 0, func(agentproto.Frame) error { return nil }) },
	} {
		if err := call(); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("forgotten job: %v, want ErrNotFound", err)
		}
	}
	// A forgotten id can be used again.
	mustStart(t, c, agentproto.ExecRequest{JobID: "quick", Command: []string{"echo", "again"}})
	if again := mustStream(t, c, "quick", 0, 0); string(again.stdout) != "again\n" {
		t.Errorf("reused id: %q", again.stdout)
	}
	if err := c.CancelJob(ctx, "slow", 0); err != nil {
		t.Fatal(err)
	}
	if x := mustStream(t, c, "slow", 0, 0).exit; x.ExitReason != "canceled" {
		t.Errorf("slow: %+v", x)
	}
	// A failing callback ends the stream with its own error.
	stop := errors.New("stop here")
	if err := c.StreamJob(ctx, "slow", 0, 0, func(agentproto.Frame) error { return stop }); err != stop {
		t.Errorf("callback error: %v", err)
	}
}

func TestJobConcurrentStreams(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	wantOut, wantErr, script := randomFiles(t, t.TempDir(), 30, "0.01")
	mustStart(t, a.client, agentproto.ExecRequest{JobID: "shared", Script: script})
	// Readers join while the job runs, from offsets it has already passed.
	deadline := time.Now().Add(60 * time.Second)
	for {
		info, err := a.client.JobInfo(context.Background(), "shared")
		if err != nil {
			t.Fatal(err)
		}
		if info.StdoutBytes >= 8000 && info.StderrBytes >= 4000 {
			if !info.Running {
				t.Log("the job finished before the readers joined")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job made no progress: %+v", info)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Half the readers use their own connection.
			c := a.client
			if i%2 == 1 {
				c = agentclient.Dial(a.socket)
				defer c.Close()
			}
			so, se := int64(i*1000), int64(i*500)
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			out, err := streamJob(ctx, c, "shared", so, se)
			switch {
			case err != nil:
				errs <- err
			case !bytes.Equal(out.stdout, wantOut[so:]) || !bytes.Equal(out.stderr, wantErr[se:]):
				errs <- fmt.Errorf("reader %d: got %d/%d bytes, want %d/%d", i, len(out.stdout), len(out.stderr), len(wantOut[so:]), len(wantErr[se:]))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestAgentShutdownKillsJobTrees(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	dir := t.TempDir()
	mustStart(t, a.client, agentproto.ExecRequest{JobID: "tree", Script: escapeScript(dir)})
	pids := waitPIDs(t, dir, "main", "session", "orphan")
	checkEscaped(t, pids[0], pids[1], pids[2])
	a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("agent did not exit after SIGTERM")
	}
	waitGone(t, 5*time.Second, pids...)
}

// TestJobReleaseDropsStoredOutput releases a finished job's output in
// steps: streams from a released offset still get every byte after it and
// a stream from before it is refused (TestOutputRelease checks the memory).
func TestJobReleaseDropsStoredOutput(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	const mib = 1 << 20
	// 48 MiB of stdout in 1 MiB writes, each a different byte, and a
	// little stderr.
	script := `i=0; while [ $i -lt 48 ]; do head -c 1048576 /dev/zero | tr '\0' "\\$(printf %o $((i % 200 + 32)))"; i=$((i+1)); done; echo done >&2`
	mustStart(t, a.client, agentproto.ExecRequest{JobID: "rel", Script: script, MaxOutputBytes: 64 * mib})
	full := mustStream(t, a.client, "rel", 0, 0)
	if len(full.stdout) != 48*mib || string(full.stderr) != "done\n" || full.exit.ExitCode != 0 {
		t.Fatalf("job wrote %d bytes, stderr %q, exit %+v", len(full.stdout), full.stderr, full.exit)
	}
	ctx := context.Background()
	for _, at := range []int64{5*mib + 17, 30 * mib, 47 * mib} {
		if err := a.client.ReleaseJob(ctx, "rel", at, 0); err != nil {
			t.Fatalf("release at %d: %v", at, err)
		}
		got := mustStream(t, a.client, "rel", at, 0)
		if !bytes.Equal(got.stdout, full.stdout[at:]) || !bytes.Equal(got.stderr, full.stderr) || got.exit != full.exit {
			t.Fatalf("stream from the released offset %d: %d bytes, want the last %d", at, len(got.stdout), int64(len(full.stdout))-at)
		}
	}
	// Whole blocks below the last release are gone: a stream from the start
	// is refused with a clear class.
	_, err := streamJob(ctx, a.client, "rel", 0, 0)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("stream from 0 after release: %v, want failed precondition", err)
	}
	// Release is idempotent and never moves back.
	if err := a.client.ReleaseJob(ctx, "rel", 1, 0); err != nil {
		t.Fatal(err)
	}
	if got := mustStream(t, a.client, "rel", 47*mib, 0); len(got.stdout) != mib {
		t.Fatalf("stream from 47 MiB after a smaller release: %d bytes", len(got.stdout))
	}
	if err := a.client.ReleaseJob(ctx, "nosuchjob", 0, 0); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("release of an unknown job: %v", err)
	}
}

// shimOf runs a job that prints its parent's pid, which is its shim's.
func shimOf(t *testing.T, c *agentclient.Client, id string) int {
	t.Helper()
	mustStart(t, c, agentproto.ExecRequest{JobID: id, Script: `echo $PPID`})
	out := mustStream(t, c, id, 0, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(out.stdout)))
	if err != nil || out.exit.ExitCode != 0 {
		t.Fatalf("job %s: %q %q %+v", id, out.stdout, out.stderr, out.exit)
	}
	return pid
}

// procAlive reports whether pid exists and is not a zombie.
func procAlive(pid int) bool {
	p, ok := readProc(pid)
	return ok && p.state != 'Z'
}

func TestJobShimReuse(t *testing.T) {
	t.Parallel()
	// No spare is started in the background while a job runs, however
	// slow the machine: the shims seen are the ones the jobs used.
	a := startAgent(t, "GENESIS_AGENT_SPARE_REFILL_MS=600000")
	children := func() []procInfo {
		return procsWhere(func(p procInfo) bool { return p.ppid == a.pid() })
	}

	// Jobs one after another run under the same warm shim, and no other
	// process is started for them.
	first := shimOf(t, a.client, "one")
	before := children()
	for i := range 5 {
		if got := shimOf(t, a.client, fmt.Sprintf("seq%d", i)); got != first {
			t.Fatalf("job %d ran under shim %d, the one before under %d: shims are not reused", i, got, first)
		}
	}
	if after := children(); len(after) != len(before) {
		t.Errorf("the agent's children went from %+v to %+v over jobs that reused one shim", before, after)
	}
	// Between jobs the shim is an idle spare again, holding none of the
	// last job's descriptors: its stdio is what the agent started it with
	// (/dev/null, and the agent's stderr for its own messages).
	if !idleSpare(first) {
		t.Errorf("shim %d is not named as an idle spare after its job", first)
	}
	agentStderr, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/2", a.pid()))
	for n, want := range []string{os.DevNull, os.DevNull, agentStderr} {
		if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", first, n)); target != want {
			t.Errorf("idle shim's fd %d is %s, want %s", n, target, want)
		}
	}
	// Beyond its stdio, status pipe (3) and control socket (4), it holds
	// no pipe of its own (the agent's inherited descriptors aside): the
	// jobs' ends were closed as their commands started, and the agent
	// closed its ends when the jobs ended.
	agentFDs := map[string]bool{}
	afds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", a.pid()))
	for _, fd := range afds {
		target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", a.pid(), fd.Name()))
		agentFDs[target] = true
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", first))
	for _, fd := range fds {
		if n, _ := strconv.Atoi(fd.Name()); n > 4 {
			if target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", first, n)); strings.HasPrefix(target, "pipe:") && !agentFDs[target] {
				t.Errorf("idle shim holds fd %d, %s", n, target)
			}
		}
	}

	// A signal that comes to the agent while the shim is idle is not sent
	// to it (it runs no job), so it cannot reach the shim's next job.
	forwarded := func() int { return strings.Count(a.stderr.String(), "forwarded signal") }
	if err := syscall.Kill(a.pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitCond(t, "the forwarded SIGHUP to be logged", func() bool { return forwarded() == 1 })
	if _, line, _ := strings.Cut(a.stderr.String(), "forwarded signal"); !strings.HasPrefix(line, `" signal=hangup jobs=0`) {
		t.Errorf("a signal that came while no job ran was forwarded to something: %q", line)
	}
	mustStart(t, a.client, agentproto.ExecRequest{JobID: "after-hup", Script: `sleep 0.3; echo $PPID`})
	hup := mustStream(t, a.client, "after-hup", 0, 0)
	if hup.exit.ExitCode != 0 || strings.TrimSpace(string(hup.stdout)) != strconv.Itoa(first) {
		t.Errorf("job after an idle-time SIGHUP: %q %+v, want exit 0 under shim %d", hup.stdout, hup.exit, first)
	}

	// A shim that was forwarded a signal during its job is retired after
	// it: the signal could have crossed the job's end. The job ignores the
	// signal and ends only once the test saw it forwarded.
	gate := filepath.Join(t.TempDir(), "go")
	mustStart(t, a.client, agentproto.ExecRequest{JobID: "hup-during", Script: `trap '' HUP; echo $PPID; while [ ! -e ` + gate + ` ]; do sleep 0.01; done`})
	waitCond(t, "the signalled job's output", func() bool {
		info, err := a.client.JobInfo(context.Background(), "hup-during")
		return err == nil && info.StdoutBytes > 0
	})
	if err := syscall.Kill(a.pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitCond(t, "the second forwarded SIGHUP to be logged", func() bool { return forwarded() == 2 })
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	during := mustStream(t, a.client, "hup-during", 0, 0)
	if during.exit.ExitCode != 0 || strings.TrimSpace(string(during.stdout)) != strconv.Itoa(first) {
		t.Fatalf("job that ignored a forwarded SIGHUP: %q %+v, want exit 0 under shim %d", during.stdout, during.exit, first)
	}
	waitCond(t, "the signalled job's shim to exit", func() bool { return !procAlive(first) })
	first = shimOf(t, a.client, "after-signalled")

	// A shim that was sent a control byte (a cancel) is retired, not
	// reused: the next job gets another shim and the old one exits.
	mustStart(t, a.client, agentproto.ExecRequest{JobID: "canceled", Script: `echo $PPID; exec sleep 60`})
	waitCond(t, "the canceled job's output", func() bool {
		info, err := a.client.JobInfo(context.Background(), "canceled")
		return err == nil && info.StdoutBytes > 0
	})
	if err := a.client.CancelJob(context.Background(), "canceled", 0); err != nil {
		t.Fatal(err)
	}
	c := mustStream(t, a.client, "canceled", 0, 0)
	canceledShim, _ := strconv.Atoi(strings.TrimSpace(string(c.stdout)))
	if canceledShim != first || c.exit.ExitReason != agentproto.ExitReasonCanceled {
		t.Fatalf("canceled job: shim %d (want %d), exit %+v", canceledShim, first, c.exit)
	}
	if next := shimOf(t, a.client, "after-cancel"); next == canceledShim {
		t.Errorf("the job after a cancel ran under the canceled job's shim %d", next)
	}
	waitCond(t, "the canceled job's shim to exit", func() bool { return !procAlive(canceledShim) })
}

func TestJobStartFollow(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var info agentproto.JobInfo
	var got jobOutput
	err := a.client.StartJobFollow(ctx, agentproto.JobStartRequest{ExecRequest: agentproto.ExecRequest{
		JobID: "follow", Script: `echo out; echo err >&2; exit 4`,
	}}, func(i agentproto.JobInfo) {
		if got.frames > 0 {
			t.Errorf("started called after %d frames", got.frames)
		}
		info = i
	}, func(fr agentproto.Frame) error {
		got.frames++
		switch fr.Type {
		case agentproto.FrameStdout:
			got.stdout = append(got.stdout, fr.Payload...)
		case agentproto.FrameStderr:
			got.stderr = append(got.stderr, fr.Payload...)
		case agentproto.FrameExit:
			return json.Unmarshal(fr.Payload, &got.exit)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if info.JobID != "follow" || info.PID <= 0 {
		t.Errorf("started with %+v", info)
	}
	if string(got.stdout) != "out\n" || string(got.stderr) != "err\n" || got.exit.ExitCode != 4 {
		t.Errorf("followed %q %q %+v", got.stdout, got.stderr, got.exit)
	}
	// The job is an ordinary background job: its stream can be read again.
	if again := mustStream(t, a.client, "follow", 0, 0); string(again.stdout) != "out\n" || again.exit != got.exit {
		t.Errorf("stream after follow: %q %+v", again.stdout, again.exit)
	}

	// A request the agent refuses never calls started.
	called := false
	err = a.client.StartJobFollow(ctx, agentproto.JobStartRequest{ExecRequest: agentproto.ExecRequest{JobID: "follow", Script: "true"}},
		func(agentproto.JobInfo) { called = true }, func(agentproto.Frame) error { return nil })
	if !errors.Is(err, errdefs.ErrConflict) || called {
		t.Errorf("second start of the same id: %v (started called: %v), want a conflict", err, called)
	}
}
