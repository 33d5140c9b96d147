package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"genesis.dev/sandbox/client"
)

// shellMessage is a text (control) message of the terminal WebSocket.
type shellMessage = client.TerminalMessage

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
