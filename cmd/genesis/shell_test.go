package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/creack/pty"

	"genesis.dev/sandbox/client"
)

// shellWait bounds the waits of the shell tests.
const shellWait = 30 * time.Second

// fakeTerminal is a loopback terminal WebSocket endpoint. It records the
// upgrade request and everything the client sent; script drives the
// server side of each connection.
type fakeTerminal struct {
	URL string

	mu      sync.Mutex
	reqs    []*http.Request
	input   bytes.Buffer
	control []shellMessage
	changed chan struct{}
}

func newFakeTerminal(t *testing.T, script func(ctx context.Context, f *fakeTerminal, ws *websocket.Conn)) *fakeTerminal {
	t.Helper()
	f := &fakeTerminal{changed: make(chan struct{}, 64)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.reqs = append(f.reqs, r)
		f.mu.Unlock()
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ctx, cancel := context.WithTimeout(r.Context(), shellWait)
		defer cancel()
		// Record what the client sends; the script reads only through f.
		go func() {
			for {
				typ, data, err := ws.Read(ctx)
				if err != nil {
					return
				}
				f.mu.Lock()
				if typ == websocket.MessageBinary {
					f.input.Write(data)
				} else {
					var m shellMessage
					_ = json.Unmarshal(data, &m)
					f.control = append(f.control, m)
				}
				f.mu.Unlock()
				select {
				case f.changed <- struct{}{}:
				default:
				}
			}
		}()
		script(ctx, f, ws)
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// waitFor polls until cond holds for what the client sent.
func (f *fakeTerminal) waitFor(ctx context.Context, cond func(input string, control []shellMessage) bool) bool {
	for {
		f.mu.Lock()
		ok := cond(f.input.String(), f.control)
		f.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-f.changed:
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func sendJSON(ctx context.Context, ws *websocket.Conn, v any) {
	b, _ := json.Marshal(v)
	_ = ws.Write(ctx, websocket.MessageText, b)
}

func shellBool(b bool) *bool { return &b }
func shellInt(i int) *int    { return &i }

func TestShellForwardsInputOutputAndExitCode(t *testing.T) {
	t.Parallel()
	f := newFakeTerminal(t, func(ctx context.Context, f *fakeTerminal, ws *websocket.Conn) {
		sendJSON(ctx, ws, shellMessage{Type: "hello", Terminal: "term_x", Writer: shellBool(true)})
		if !f.waitFor(ctx, func(in string, _ []shellMessage) bool { return strings.Contains(in, "exit 3\n") }) {
			return
		}
		ws.Write(ctx, websocket.MessageBinary, []byte("remote says hi\r\n"))
		sendJSON(ctx, ws, shellMessage{Type: "exit", Code: shellInt(3), Reason: "exited"})
		ws.Close(websocket.StatusNormalClosure, "exited")
	})
	r := cli(t, f.URL, "echo hi\nexit 3\n", nil, "shell", "sbx_1", "--terminal", "term_x", "--takeover")
	if r.code != 3 {
		t.Fatalf("exit code %d, want 3 (stderr %q)", r.code, r.stderr)
	}
	if r.stdout != "remote says hi\r\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	if r.stderr != "" {
		t.Errorf("stderr %q, want nothing for a reconnecting writer", r.stderr)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if got := f.input.String(); got != "echo hi\nexit 3\n" {
		t.Errorf("input reached the terminal as %q", got)
	}
	req := f.reqs[0]
	if req.URL.Path != "/v1/sandboxes/sbx_1/terminal" || req.URL.Query().Get("terminal") != "term_x" ||
		req.URL.Query().Get("takeover") != "1" || req.URL.Query().Has("cols") {
		t.Errorf("upgrade request %s", req.URL)
	}
	if req.Header.Get("Authorization") != "Bearer k" {
		t.Errorf("Authorization %q", req.Header.Get("Authorization"))
	}
}

func TestShellNotesRolesAndZeroExit(t *testing.T) {
	t.Parallel()
	f := newFakeTerminal(t, func(ctx context.Context, f *fakeTerminal, ws *websocket.Conn) {
		sendJSON(ctx, ws, shellMessage{Type: "hello", Terminal: "term_new", Writer: shellBool(false)})
		sendJSON(ctx, ws, shellMessage{Type: "writer", Writer: shellBool(true)})
		sendJSON(ctx, ws, shellMessage{Type: "exit", Code: shellInt(0)})
		ws.Close(websocket.StatusNormalClosure, "exited")
	})
	r := cli(t, f.URL, "", nil, "shell", "sbx_1")
	if r.code != 0 {
		t.Fatalf("exit code %d, want 0 (stderr %q)", r.code, r.stderr)
	}
	for _, want := range []string{"terminal term_new (reconnect or watch with --terminal term_new)", "watching read-only", "you are now the writer"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr %q lacks %q", r.stderr, want)
		}
	}
}

func TestShellConnectionLost(t *testing.T) {
	t.Parallel()
	f := newFakeTerminal(t, func(ctx context.Context, f *fakeTerminal, ws *websocket.Conn) {
		sendJSON(ctx, ws, shellMessage{Type: "hello", Terminal: "term_lost", Writer: shellBool(true)})
		ws.Close(websocket.StatusInternalError, "connection to the sandbox lost")
	})
	r := cli(t, f.URL, "", nil, "shell", "sbx_1")
	if r.code != 1 || !strings.Contains(r.stderr, "reconnect with --terminal term_lost") || !strings.Contains(r.stderr, "1011") {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestShellRefusedUpgradeIsAnAPIError(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, problem(http.StatusNotFound, "terminal_not_found", "sandbox sbx_1 has no terminal \"term_zz\""))
	r := cli(t, api.URL, "", nil, "shell", "sbx_1", "--terminal", "term_zz")
	if r.code != 1 || !strings.Contains(r.stderr, `has no terminal "term_zz" (terminal_not_found, request id req-42)`) {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	if r := cli(t, api.URL, "", nil, "shell"); r.code != 2 {
		t.Fatalf("no sandbox: exit %d, want 2 (usage)", r.code)
	}
}

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
	if before.Lflag&syscall.ICANON == 0 || before.Lflag&syscall.ECHO == 0 {
		t.Fatalf("a new pty should start cooked: lflag %#x", before.Lflag)
	}
	go io.Copy(io.Discard, master) // whatever the CLI prints

	sawRaw := make(chan syscall.Termios, 1)
	f := newFakeTerminal(t, func(ctx context.Context, f *fakeTerminal, ws *websocket.Conn) {
		sendJSON(ctx, ws, shellMessage{Type: "hello", Terminal: "term_pty", Writer: shellBool(true)})
		// The CLI goes raw once connected.
		var raw syscall.Termios
		if !f.waitFor(ctx, func(string, []shellMessage) bool {
			raw, _ = getTermios(tty)
			return raw.Lflag&syscall.ICANON == 0
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
		if raw.Lflag&(syscall.ICANON|syscall.ECHO|syscall.ISIG) != 0 || raw.Iflag&syscall.ICRNL != 0 || raw.Oflag&syscall.OPOST != 0 {
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
