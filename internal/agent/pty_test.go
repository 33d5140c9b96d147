package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// termWait bounds every wait for terminal output; the machine is loaded.
const termWait = 30 * time.Second

// termReader follows one attachment: it collects output (checking that
// offsets never go back) and the exit.
type termReader struct {
	att *agentclient.Attachment

	mu     sync.Mutex
	out    bytes.Buffer
	first  int64 // offset of the first byte received, -1 before any
	next   int64 // offset after the last byte received
	gaps   int
	exit   *agentproto.ExitResult
	err    error
	ended  chan struct{}
	frames int
}

func attach(t *testing.T, c *agentclient.Client, id string, opts agentclient.AttachOptions) *termReader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*termWait)
	att, err := c.AttachTerminal(ctx, id, opts)
	if err != nil {
		cancel()
		t.Fatalf("attach %s: %v", id, err)
	}
	r := &termReader{att: att, first: -1, ended: make(chan struct{})}
	t.Cleanup(func() { att.Close(); cancel() })
	go r.run()
	return r
}

func (r *termReader) run() {
	defer close(r.ended)
	for {
		fr, err := r.att.Next()
		r.mu.Lock()
		if err != nil {
			r.err = err
			r.mu.Unlock()
			return
		}
		r.frames++
		if fr.Type == agentproto.FrameExit {
			x, err := agentclient.DecodeExit(fr)
			r.exit, r.err = &x, err
			r.mu.Unlock()
			return
		}
		switch {
		case r.first < 0:
			r.first = fr.Offset
		case fr.Offset < r.next:
			r.err = fmt.Errorf("frame at offset %d goes back before %d", fr.Offset, r.next)
			r.mu.Unlock()
			return
		case fr.Offset > r.next:
			r.gaps++
		}
		r.out.Write(fr.Payload)
		r.next = fr.Offset + int64(len(fr.Payload))
		r.mu.Unlock()
	}
}

func (r *termReader) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// waitFor polls until the output contains want.
func (r *termReader) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(termWait)
	for !strings.Contains(r.output(), want) {
		select {
		case <-r.ended:
			if !strings.Contains(r.output(), want) {
				t.Fatalf("attachment ended (err %v) without %q in output %q", r.err, want, r.output())
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in terminal output within %v: %q", want, termWait, r.output())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitExit waits for the exit frame.
func (r *termReader) waitExit(t *testing.T) agentproto.ExitResult {
	t.Helper()
	select {
	case <-r.ended:
	case <-time.After(termWait):
		t.Fatalf("no exit frame within %v; output %q", termWait, r.output())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.exit == nil || r.err != nil {
		t.Fatalf("attachment ended without an exit: %v; output %q", r.err, r.out.String())
	}
	return *r.exit
}

func (r *termReader) send(t *testing.T, s string) {
	t.Helper()
	if _, err := r.att.Write([]byte(s)); err != nil {
		t.Fatalf("input %q: %v", s, err)
	}
}

func startTerm(t *testing.T, c *agentclient.Client, req agentproto.TerminalStartRequest) agentproto.TerminalInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), termWait)
	defer cancel()
	info, err := c.StartTerminal(ctx, req)
	if err != nil {
		t.Fatalf("StartTerminal(%+v): %v", req, err)
	}
	// A command may end before the answer is written (it then carries the exit).
	if info.ID != req.ID || (!info.Running && info.Exit == nil) || info.PID <= 0 {
		t.Fatalf("StartTerminal answered %+v", info)
	}
	return info
}

func TestTerminalEchoThroughPTY(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "TERM=") // TERM defaults to xterm-256color
	info := startTerm(t, a.client, agentproto.TerminalStartRequest{ID: "t1", Env: map[string]string{"PS1": "$ "}})
	if info.Command[0] != "/bin/bash" && info.Command[0] != "/bin/sh" {
		t.Errorf("default command %v, want the user's shell", info.Command)
	}
	if info.Cols != agentproto.DefaultTerminalCols || info.Rows != agentproto.DefaultTerminalRows {
		t.Errorf("default size %dx%d", info.Cols, info.Rows)
	}
	r := attach(t, a.client, "t1", agentclient.AttachOptions{Replay: true})
	// The arithmetic shows the shell ran the line: its echo has the source.
	r.send(t, "echo sum=$((40+2)); test -t 0 && test -t 1 && echo stdio-is-a-tty; echo term=$TERM; tty\n")
	r.waitFor(t, "sum=42")
	r.waitFor(t, "stdio-is-a-tty")
	r.waitFor(t, "term=xterm-256color")
	r.waitFor(t, "/dev/pts/")
	// The shell is a session leader with the tty as controlling terminal:
	// its process group is in the foreground (Ctrl-C reaches it).
	r.send(t, "sleep 1000; echo after-interrupt\n")
	waitProc(t, func(p procInfo) bool { return p.pgrp != info.PID && isSleep(p.pid) && sessionOf(p.pid) == info.PID })
	r.send(t, "\x03")
	r.waitFor(t, "after-interrupt")
	r.send(t, "exit 0\n")
	if x := r.waitExit(t); x.ExitCode != 0 || x.ExitReason != agentproto.ExitReasonExited {
		t.Fatalf("exit %+v, want 0", x)
	}
}

func TestTerminalResize(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	startTerm(t, a.client, agentproto.TerminalStartRequest{ID: "sz", Command: []string{"/bin/sh"}, Cols: 100, Rows: 30})
	r := attach(t, a.client, "sz", agentclient.AttachOptions{Replay: true})
	r.send(t, "echo size=$(stty size)\n")
	r.waitFor(t, "size=30 100")
	ctx, cancel := context.WithTimeout(context.Background(), termWait)
	defer cancel()
	info, err := a.client.ResizeTerminal(ctx, "sz", 132, 43)
	if err != nil {
		t.Fatal(err)
	}
	if info.Cols != 132 || info.Rows != 43 {
		t.Fatalf("info after resize: %+v", info)
	}
	r.send(t, "echo size=$(stty size)\n")
	r.waitFor(t, "size=43 132")
	for _, bad := range [][2]int{{0, 10}, {10, 0}, {-1, 5}, {70000, 5}} {
		if _, err := a.client.ResizeTerminal(ctx, "sz", bad[0], bad[1]); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("resize %v: %v, want invalid argument", bad, err)
		}
	}
	if _, err := a.client.ResizeTerminal(ctx, "nope", 10, 10); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("resize of an unknown terminal: %v, want not found", err)
	}
}

func TestTerminalReplayAfterReattach(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	startTerm(t, a.client, agentproto.TerminalStartRequest{ID: "re", Command: []string{"/bin/sh"}})
	r1 := attach(t, a.client, "re", agentclient.AttachOptions{Replay: true})
	r1.send(t, "echo first-$((1+1))\n")
	r1.waitFor(t, "first-2")
	r1.att.Close()
	<-r1.ended

	// Output made while nobody reads it is kept too: an input-only
	// attachment, closed once the output is there.
	ctx, cancel := context.WithTimeout(context.Background(), termWait)
	defer cancel()
	w, err := a.client.AttachTerminal(ctx, "re", agentclient.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("echo second-$((2+2)); head -c 200 /dev/zero | tr '\\0' y; echo\n")); err != nil {
		t.Fatal(err)
	}
	waitCond(t, "second output produced", func() bool {
		info, err := a.client.TerminalInfo(ctx, "re")
		return err == nil && info.OutputBytes > int64(len(r1.output()))+200
	})
	w.Close()

	r2 := attach(t, a.client, "re", agentclient.AttachOptions{Replay: true})
	r2.waitFor(t, "second-4")
	if got := r2.output(); !strings.Contains(got, "first-2") || r2.first != 0 {
		t.Fatalf("replay starts at %d with %q; want everything from offset 0", r2.first, got)
	}
	// Live only: nothing old.
	r3 := attach(t, a.client, "re", agentclient.AttachOptions{})
	// Resume from an offset: exactly the bytes after it.
	off := int64(len(r1.output()))
	r4 := attach(t, a.client, "re", agentclient.AttachOptions{Offset: off})
	r2.send(t, "echo third-$((3+3))\n")
	r3.waitFor(t, "third-6")
	r4.waitFor(t, "third-6")
	if got := r3.output(); strings.Contains(got, "first-2") || strings.Contains(got, "second-4") {
		t.Fatalf("live-only attachment got old output: %q", got)
	}
	if r4.first != off || strings.Contains(r4.output(), "first-2") || !strings.Contains(r4.output(), "second-4") {
		t.Fatalf("attachment at offset %d started at %d with %q", off, r4.first, r4.output())
	}
	// Every attachment sees the same bytes at the same offsets.
	if full, part := r2.output(), r4.output(); int64(len(full)) < off || !strings.HasPrefix(full[off:], part) {
		t.Errorf("output from offset %d %q is not the full output's %q", off, part, full)
	}
}

func TestTerminalReplayKeepsOnlyTheTail(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	// 200 KiB of output, nobody attached, then a marker.
	startTerm(t, a.client, agentproto.TerminalStartRequest{ID: "big", Command: []string{"/bin/sh", "-c",
		"head -c 204800 /dev/zero | tr '\\0' x; echo; echo END-MARK; exec sleep 1000"}})
	ctx, cancel := context.WithTimeout(context.Background(), termWait)
	defer cancel()
	var info agentproto.TerminalInfo
	waitCond(t, "200 KiB of output", func() bool {
		var err error
		info, err = a.client.TerminalInfo(ctx, "big")
		return err == nil && info.OutputBytes >= 204800+10
	})
	r := attach(t, a.client, "big", agentclient.AttachOptions{Replay: true})
	r.waitFor(t, "END-MARK")
	if r.first <= 0 || r.first != info.KeptFrom || info.OutputBytes-info.KeptFrom != agentproto.TerminalBufferBytes {
		t.Fatalf("replay from %d, info %+v; want the last %d bytes", r.first, info, agentproto.TerminalBufferBytes)
	}
	if n := len(r.output()); n < agentproto.TerminalBufferBytes {
		t.Fatalf("replayed %d bytes, want at least %d", n, agentproto.TerminalBufferBytes)
	}
}

func TestTerminalExitCode(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	startTerm(t, a.client, agentproto.TerminalStartRequest{ID: "ex", Command: []string{"/bin/sh"}})
	r := attach(t, a.client, "ex", agentclient.AttachOptions{Replay: true})
	r.send(t, "echo bye; exit 3\n")
	x := r.waitExit(t)
	if x.ExitCode != 3 || x.ExitReason != agentproto.ExitReasonExited {
		t.Fatalf("exit %+v, want code 3", x)
	}
	if !strings.Contains(r.output(), "bye") {
		t.Fatalf("output before the exit frame: %q", r.output())
	}
	ctx, cancel := context.WithTimeout(context.Background(), termWait)
	defer cancel()
	info, err := a.client.TerminalInfo(ctx, "ex")
	if err != nil || info.Running || info.Exit == nil || info.Exit.ExitCode != 3 {
		t.Fatalf("info after exit: %+v, %v", info, err)
	}
	// A late attachment gets the kept output and the exit at once.
	late := attach(t, a.client, "ex", agentclient.AttachOptions{Replay: true})
	if x := late.waitExit(t); x.ExitCode != 3 || !strings.Contains(late.output(), "bye") {
		t.Fatalf("late attachment: exit %+v, output %q", x, late.output())
	}
	if _, err := a.client.ResizeTerminal(ctx, "ex", 10, 10); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("resize after exit: %v, want conflict (failed precondition)", err)
	}
	// Killed by a signal: 128+N and the signal's name.
	startTerm(t, a.client, agentproto.TerminalStartRequest{ID: "sig", Command: []string{"/bin/sh", "-c", "sleep 1; kill -TERM $$"}})
	if x := attach(t, a.client, "sig", agentclient.AttachOptions{Replay: true}).waitExit(t); x.ExitCode != 128+15 || x.Signal != "SIGTERM" {
		t.Fatalf("exit %+v, want SIGTERM", x)
	}
}

func TestTerminalDeleteKillsProcessGroup(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	// Without job control, the background sleep stays in the shell's group.
	info := startTerm(t, a.client, agentproto.TerminalStartRequest{ID: "del", Command: []string{"/bin/sh", "-c", "sleep 1000 & sleep 1000; echo survived"}})
	pid := info.PID
	waitProc(t, func(p procInfo) bool { return p.pgrp == pid && isSleep(p.pid) })
	waitCond(t, "two sleeps in the terminal's group", func() bool {
		return len(procsWhere(func(p procInfo) bool { return p.pgrp == pid && isSleep(p.pid) })) == 2
	})
	r := attach(t, a.client, "del", agentclient.AttachOptions{Replay: true})
	ctx, cancel := context.WithTimeout(context.Background(), termWait)
	defer cancel()
	if err := a.client.DeleteTerminal(ctx, "del"); err != nil {
		t.Fatal(err)
	}
	// SIGKILL went to the whole group; a loaded machine may take a moment
	// to run the deaths.
	waitNoProcs(t, "processes of the terminal's group after DELETE", 5*time.Second, func(p procInfo) bool { return p.pgrp == pid && p.state != 'Z' })
	if x := r.waitExit(t); x.ExitReason != agentproto.ExitReasonSignal || x.Signal != "SIGKILL" {
		t.Fatalf("exit after delete %+v, want SIGKILL", x)
	}
	if _, err := a.client.TerminalInfo(ctx, "del"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("info after delete: %v, want not found", err)
	}
	if err := a.client.DeleteTerminal(ctx, "del"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("second delete: %v, want not found", err)
	}
	if _, err := a.client.AttachTerminal(ctx, "del", agentclient.AttachOptions{}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("attach after delete: %v, want not found", err)
	}
}

func TestTerminalBadRequests(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	startTerm(t, a.client, agentproto.TerminalStartRequest{ID: "dup", Command: []string{"/bin/sh"}})
	ctx, cancel := context.WithTimeout(context.Background(), termWait)
	defer cancel()
	tests := []struct {
		name string
		req  agentproto.TerminalStartRequest
		want error
	}{
		{"duplicate id", agentproto.TerminalStartRequest{ID: "dup"}, errdefs.ErrConflict},
		{"empty id", agentproto.TerminalStartRequest{}, errdefs.ErrInvalidArgument},
		{"slash in id", agentproto.TerminalStartRequest{ID: "a/b"}, errdefs.ErrInvalidArgument},
		{"long id", agentproto.TerminalStartRequest{ID: strings.Repeat("a", 129)}, errdefs.ErrInvalidArgument},
		{"negative size", agentproto.TerminalStartRequest{ID: "n", Cols: -1}, errdefs.ErrInvalidArgument},
		{"huge size", agentproto.TerminalStartRequest{ID: "h", Rows: 65536}, errdefs.ErrInvalidArgument},
		{"command not found", agentproto.TerminalStartRequest{ID: "nf", Command: []string{"no-such-command-xyz"}}, errdefs.ErrInvalidArgument},
		{"missing cwd", agentproto.TerminalStartRequest{ID: "cwd", Cwd: "/nonexistent-dir"}, errdefs.ErrInvalidArgument},
		{"bad env", agentproto.TerminalStartRequest{ID: "env", Env: map[string]string{"A=B": "c"}}, errdefs.ErrInvalidArgument},
	}
	for _, tt := range tests {
		if _, err := a.client.StartTerminal(ctx, tt.req); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	infos, err := a.client.ListTerminals(ctx)
	if err != nil || len(infos) != 1 || infos[0].ID != "dup" {
		t.Fatalf("list: %+v, %v; want only dup (failed starts leave nothing)", infos, err)
	}
}

// waitProc polls until a process matches keep.
func waitProc(t *testing.T, keep func(procInfo) bool) {
	t.Helper()
	waitCond(t, "process", func() bool { return len(procsWhere(keep)) > 0 })
}

func waitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(termWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, termWait)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func isSleep(pid int) bool {
	b, _ := readFileString("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(b) == "sleep"
}

// sessionOf is the session id of pid (field 6 of /proc/PID/stat).
func sessionOf(pid int) int {
	b, err := readFileString("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	i := strings.LastIndexByte(b, ')')
	f := strings.Fields(b[i+1:])
	if len(f) < 4 {
		return -1
	}
	sid, _ := strconv.Atoi(f[3])
	return sid
}

func readFileString(p string) (string, error) {
	b, err := os.ReadFile(p)
	return string(b), err
}
