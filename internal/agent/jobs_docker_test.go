package agent_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/images"
	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/testenv"
)

// jobContainer runs the agent (testenv.AgentDir) as PID 1 of a locked-down
// container of img (default: testenv.BusyboxImage) under rt and returns it
// once the agent answers. It skips when Docker or the runtime is missing.
func jobContainer(t *testing.T, rt, img string) *sandboxContainer {
	t.Helper()
	d := testenv.Docker(t)
	var have []string
	for _, r := range testenv.Runtimes(t, d) {
		have = append(have, string(r))
	}
	if !slices.Contains(have, rt) {
		t.Skipf("docker runtime %s not configured", rt)
	}
	if img == "" {
		img = testenv.BusyboxImage(t, d)
	}
	agentDir := testenv.AgentDir(t)
	runDir, err := os.MkdirTemp("", "gj")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runDir) })
	if err := os.Chown(runDir, sandboxUID, sandboxUID); err != nil {
		t.Fatal(err)
	}
	id, err := dockerCmd(60*time.Second, nil, "run", "-d",
		"--name", fmt.Sprintf("genesis-agent-jobs-%s-%d", rt, time.Now().UnixNano()),
		"--label", testenv.LabelTest+"=1",
		"--runtime", rt,
		"--network", "none",
		"--cap-drop", "ALL",
		"--security-opt", "no-new-privileges",
		"--user", fmt.Sprintf("%d:%d", sandboxUID, sandboxUID),
		"--env", "GENESIS_AGENT_LOG_LEVEL=debug",
		"-v", agentDir+":/.genesis:ro",
		"-v", runDir+":/run/genesis",
		"--entrypoint", "/.genesis/genesis-agent", img, "serve", "--socket", "/run/genesis/agent.sock")
	if err != nil {
		t.Fatal(err)
	}
	c := &sandboxContainer{id: id, client: agentclient.Dial(filepath.Join(runDir, "agent.sock"))}
	t.Cleanup(func() {
		c.client.Close()
		if t.Failed() {
			state, err := dockerCmd(30*time.Second, nil, "inspect", "--format",
				"{{.State.Status}} exit={{.State.ExitCode}} oom={{.State.OOMKilled}} error={{.State.Error}}", id)
			logs, lerr := dockerCmd(30*time.Second, nil, "logs", id)
			t.Logf("container %s: %s %v; logs (%v):\n%s", id, state, err, lerr, logs)
		}
		if _, err := dockerCmd(60*time.Second, nil, "rm", "-f", "-v", id); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.client.WaitReady(ctx, 2*time.Millisecond); err != nil {
		t.Fatalf("agent in %s container not ready: %v", rt, err)
	}
	return c
}

// sandboxPID runs `cat path` in the sandbox until the file holds a pid.
func sandboxPID(t *testing.T, c *agentclient.Client, path string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res := execOK(t, c, agentproto.ExecRequest{Command: []string{"cat", path}})
		if pid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout))); err == nil && res.ExitCode == 0 {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear in the sandbox", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sandboxStat returns the ppid and process group of pid inside the sandbox,
// read from its (possibly emulated) /proc.
func sandboxStat(t *testing.T, c *agentclient.Client, pid int) (ppid, pgrp int) {
	t.Helper()
	res := execOK(t, c, agentproto.ExecRequest{Command: []string{"cat", fmt.Sprintf("/proc/%d/stat", pid)}})
	s := string(res.Stdout)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:])
	if i < 0 || len(f) < 3 {
		t.Fatalf("/proc/%d/stat: %q %q", pid, res.Stdout, res.Stderr)
	}
	ppid, _ = strconv.Atoi(f[1])
	pgrp, _ = strconv.Atoi(f[2])
	return ppid, pgrp
}

// TestJobsInContainers runs each case in a container of its own, so every
// container lives only seconds.
func TestJobsInContainers(t *testing.T) {
	cases := []struct {
		name string
		run  func(*testing.T, *sandboxContainer, string)
	}{
		{"cancel escaped tree", testContainerCancelTree},
		{"stream resume", testContainerStreamResume},
		{"start latency", testContainerStartLatency},
	}
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, jobContainer(t, rt, ""), rt) })
			}
		})
	}
}

func testContainerCancelTree(t *testing.T, c *sandboxContainer, _ string) {
	script := `echo $$ > /tmp/main
busybox setsid sh -c 'trap "" TERM; echo $$ > /tmp/session; exec sleep 1000' </dev/null &
sh -c 'sleep 1000 & echo $! > /tmp/orphan'
sleep 1000`
	info := mustStart(t, c.client, agentproto.ExecRequest{JobID: "tree", Script: script})
	main := sandboxPID(t, c.client, "/tmp/main")
	session := sandboxPID(t, c.client, "/tmp/session")
	orphan := sandboxPID(t, c.client, "/tmp/orphan")
	if main != info.PID {
		t.Errorf("JobInfo pid %d, main shell %d", info.PID, main)
	}
	shimPID, mainGrp := sandboxStat(t, c.client, main)
	_, sessGrp := sandboxStat(t, c.client, session)
	orphanParent, _ := sandboxStat(t, c.client, orphan)
	// The tree escaped the group, and the orphan was reparented to the shim
	// (a child subreaper), not to the agent (PID 1).
	if sessGrp == mainGrp || orphanParent != shimPID || shimPID == 1 {
		t.Fatalf("main %d (parent %d, group %d), session group %d, orphan parent %d", main, shimPID, mainGrp, sessGrp, orphanParent)
	}
	if left := containerProcs(t, c); len(left) < 4 {
		t.Fatalf("before cancel only %q run", left)
	}
	rss := execOK(t, c.client, agentproto.ExecRequest{Script: fmt.Sprintf("grep VmRSS /proc/%d/status", shimPID)})
	t.Logf("shim memory: %s", strings.Join(strings.Fields(string(rss.Stdout)), " "))
	start := time.Now()
	if err := c.client.CancelJob(context.Background(), "tree", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	out := mustStream(t, c.client, "tree", 0, 0)
	el := time.Since(start)
	if out.exit.ExitReason != "canceled" || out.exit.Signal != "SIGTERM" || el < 300*time.Millisecond {
		t.Errorf("exit %+v after %v, want canceled by SIGTERM after the grace", out.exit, el)
	}
	// Nothing of the job is left when its exit is reported.
	if left := containerProcs(t, c); len(left) != 0 {
		ps := execOK(t, c.client, agentproto.ExecRequest{Command: []string{"ps", "-o", "pid,ppid,pgid,stat,args"}})
		t.Errorf("processes left after cancel: %q\n%s", left, ps.Stdout)
	}
}

func testContainerStreamResume(t *testing.T, c *sandboxContainer, _ string) {
	script := `i=0; while [ $i -lt 40 ]; do head -c $((1000 + i*97)) /dev/urandom; head -c $((300 + i*61)) /dev/urandom >&2; sleep 0.01; i=$((i+1)); done`
	mustStart(t, c.client, agentproto.ExecRequest{JobID: "resume", Script: script})
	// Follow the live job with a connection dropped every ~20 KB.
	var live [2][]byte
	for attempt := 0; ; attempt++ {
		if attempt > 500 {
			t.Fatal("too many reconnects")
		}
		ctx, cancel := context.WithCancel(context.Background())
		n, done := 0, false
		err := c.client.StreamJob(ctx, "resume", int64(len(live[0])), int64(len(live[1])), func(fr agentproto.Frame) error {
			switch fr.Type {
			case agentproto.FrameStdout, agentproto.FrameStderr:
				i := int(fr.Type) - 1
				if fr.Offset != int64(len(live[i])) {
					return fmt.Errorf("stream %d frame at %d, have %d", i, fr.Offset, len(live[i]))
				}
				live[i] = append(live[i], fr.Payload...)
				if n += len(fr.Payload); n > 15000 && attempt < 8 {
					cancel()
				}
			case agentproto.FrameExit:
				done = true
			}
			return nil
		})
		cancel()
		if done {
			break
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("stream: %v", err)
		}
	}
	full := mustStream(t, c.client, "resume", 0, 0)
	if len(full.stdout) != 40*1000+97*780 || len(full.stderr) != 40*300+61*780 {
		t.Fatalf("full stream %d/%d bytes", len(full.stdout), len(full.stderr))
	}
	if !bytes.Equal(live[0], full.stdout) || !bytes.Equal(live[1], full.stderr) {
		t.Fatalf("resumed live stream differs from the full one")
	}
	rng := rand.New(rand.NewPCG(3, 3))
	for range 10 {
		so, se := rng.Int64N(int64(len(full.stdout))+1), rng.Int64N(int64(len(full.stderr))+1)
		got := mustStream(t, c.client, "resume", so, se)
		if !bytes.Equal(got.stdout, full.stdout[so:]) || !bytes.Equal(got.stderr, full.stderr[se:]) || got.exit != full.exit {
			t.Fatalf("from %d/%d: %d/%d bytes, want the remaining %d/%d", so, se, len(got.stdout), len(got.stderr),
				len(full.stdout)-int(so), len(full.stderr)-int(se))
		}
	}
}

// TestJobStreamThroughputInContainers streams 200 MiB of stdout out of a
// sandbox through agentclient, one runtime after the other, and logs MiB/s.
// The writer must not be the bottleneck: busybox head writes 4 KiB at a
// time, and under gVisor every small write is costly (GNU head's 8 KiB
// writes make 10-30 MiB/s there), so runc runs GNU head in the tool-basic
// image when it is built and runsc (or the busybox fallback) dd bs=1M.
func TestJobStreamThroughputInContainers(t *testing.T) {
	const total = 200 << 20
	img := ""
	if r, ok := images.Lookup("tool-basic"); ok {
		if _, err := dockerCmd(15*time.Second, nil, "image", "inspect", "--format", "{{.Id}}", r.Ref()); err == nil {
			img = r.Ref()
		}
	}
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			cmd := []string{"dd", "if=/dev/zero", "bs=1M", "count=200"}
			if img != "" && rt == "runc" {
				cmd = []string{"head", "-c", "200M", "/dev/zero"}
			}
			c := jobContainer(t, rt, img)
			start := time.Now()
			mustStart(t, c.client, agentproto.ExecRequest{JobID: "zeros", Command: cmd, MaxOutputBytes: 256 << 20})
			var n, frames int64
			var nonZero bool
			var exit agentproto.ExitResult
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			err := c.client.StreamJob(ctx, "zeros", 0, 0, func(fr agentproto.Frame) error {
				switch fr.Type {
				case agentproto.FrameStdout:
					if fr.Offset != n {
						return fmt.Errorf("frame at %d, have %d", fr.Offset, n)
					}
					n += int64(len(fr.Payload))
					frames++
					nonZero = nonZero || fr.Payload[0] != 0 || fr.Payload[len(fr.Payload)-1] != 0
				case agentproto.FrameStderr: // dd's summary
				case agentproto.FrameExit:
					return json.Unmarshal(fr.Payload, &exit)
				default:
					return fmt.Errorf("unexpected frame type %d", fr.Type)
				}
				return nil
			})
			el := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if n != total || exit.StdoutBytes != total || exit.StdoutTruncated || exit.ExitCode != 0 || nonZero {
				t.Fatalf("streamed %d bytes (non-zero %v), exit %+v", n, nonZero, exit)
			}
			t.Logf("%s: %q in %s", rt, cmd, cmp.Or(img, "busybox"))
			t.Logf("%s: %d MiB of stdout streamed out of the sandbox in %v: %.0f MiB/s (%d frames, job ran %d ms)",
				rt, total>>20, el.Round(time.Millisecond), float64(total>>20)/el.Seconds(), frames, exit.DurationMS)
		})
	}
}

// testContainerStartLatency logs the median time of StartJob (the answer
// comes once the command runs under its shim) and of a whole short job.
func testContainerStartLatency(t *testing.T, c *sandboxContainer, rt string) {
	const n = 20
	var start, whole []time.Duration
	for i := range n {
		id := fmt.Sprintf("true-%d", i)
		t0 := time.Now()
		mustStart(t, c.client, agentproto.ExecRequest{JobID: id, Command: []string{"true"}})
		start = append(start, time.Since(t0))
		if out := mustStream(t, c.client, id, 0, 0); out.exit.ExitCode != 0 {
			t.Fatalf("true: %+v", out.exit)
		}
		whole = append(whole, time.Since(t0))
		if err := c.client.ForgetJob(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(start)
	slices.Sort(whole)
	t.Logf("%s: background job of true: StartJob p50 %v, start to exit frame p50 %v (%d jobs)", rt, start[n/2], whole[n/2], n)
}
