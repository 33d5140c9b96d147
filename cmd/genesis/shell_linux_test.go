//go:build linux

package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/coder/websocket"
	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"genesis.dev/sandbox/client"
)

// TestShellRawModeAndResize runs the shell on a real pseudo-terminal: the
// terminal is raw while the session runs (no local echo, CR not turned
// into NL), SIGWINCH sends the new size, and the mode is restored after.
func TestShellRawModeAndResize(t *testing.T) {
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer master.Close()
	defer tty.Close()
	if err := pty.Setsize(tty, &pty.Winsize{Cols: 100, Rows: 30}); err != nil {
		t.Fatal(err)
	}
	before, err := getTermios(tty)
	if err != nil {
		t.Fatal(err)
	}
	if before.Lflag&unix.ICANON == 0 || before.Lflag&unix.ECHO == 0 {
		t.Fatalf("a new pty should start cooked: lflag %#x", before.Lflag)
	}
	go io.Copy(io.Discard, master) // whatever the CLI prints

	sawRaw := make(chan unix.Termios, 1)
	f := newFakeTerminal(t, func(ctx context.Context, f *fakeTerminal, ws *websocket.Conn) {
		sendJSON(ctx, ws, shellMessage{Type: "hello", Terminal: "term_pty", Writer: shellBool(true)})
		// The CLI goes raw once connected.
		var raw unix.Termios
		if !f.waitFor(ctx, func(string, []shellMessage) bool {
			raw, _ = getTermios(tty)
			return raw.Lflag&unix.ICANON == 0
		}) {
			return
		}
		sawRaw <- raw
		// Typing on the local terminal: the bytes arrive as typed.
		master.Write([]byte("ls\r"))
		if !f.waitFor(ctx, func(in string, _ []shellMessage) bool { return in == "ls\r" }) {
			return
		}
		pty.Setsize(tty, &pty.Winsize{Cols: 132, Rows: 43})
		syscall.Kill(os.Getpid(), syscall.SIGWINCH)
		if !f.waitFor(ctx, func(_ string, c []shellMessage) bool {
			return len(c) > 0 && c[len(c)-1].Type == "resize" && c[len(c)-1].Cols == 132 && c[len(c)-1].Rows == 43
		}) {
			return
		}
		sendJSON(ctx, ws, shellMessage{Type: "exit", Code: shellInt(7)})
		ws.Close(websocket.StatusNormalClosure, "exited")
	})
	var out, errb bytes.Buffer
	a := &app{
		stdin: tty, stdout: &out, stderr: &errb, now: testNow,
		getenv: func(k string) string {
			return map[string]string{client.EnvURL: f.URL, client.EnvAPIKey: "k"}[k]
		},
	}
	code := run(context.Background(), []string{"shell", "sbx_1"}, a)
	if code != 7 {
		t.Fatalf("exit code %d, want 7 (stderr %q)", code, errb.String())
	}
	select {
	case raw := <-sawRaw:
		if raw.Lflag&(unix.ICANON|unix.ECHO|unix.ISIG) != 0 || raw.Iflag&unix.ICRNL != 0 || raw.Oflag&unix.OPOST != 0 {
			t.Errorf("terminal not raw during the session: iflag %#x oflag %#x lflag %#x", raw.Iflag, raw.Oflag, raw.Lflag)
		}
	default:
		t.Fatal("the session never reached the raw-mode check")
	}
	after, err := getTermios(tty)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("terminal mode not restored:\nbefore %+v\nafter  %+v", before, after)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if q := f.reqs[0].URL.Query(); q.Get("cols") != "100" || q.Get("rows") != "30" {
		t.Errorf("initial size in %s, want cols=100&rows=30", f.reqs[0].URL)
	}
	if !strings.Contains(errb.String(), "term_pty (reconnect") || !strings.Contains(errb.String(), "\r\n") {
		t.Errorf("notes in raw mode must end in CRLF: %q", errb.String())
	}
}

// getTermios reads the terminal mode of f.
func getTermios(f *os.File) (unix.Termios, error) {
	t, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	if err != nil {
		return unix.Termios{}, err
	}
	return *t, nil
}
