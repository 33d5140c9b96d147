package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/creack/pty"

	"genesis.dev/sandbox/client"
)

// termWait bounds each wait for terminal output or messages.
const termWait = 60 * time.Second

// TestTerminal drives interactive terminals of real sandboxes under runc and
// runsc: over raw WebSockets (writer and observer roles, takeover, input
// only from the writer, replay on reconnect, the exit message) and through
// the real genesis CLI on a pseudo-terminal (raw mode, resize, exit status).
func TestTerminal(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt})
			t.Run("websocket", func(t *testing.T) { testTerminalWebSocket(t, svc, sb.ID) })
			t.Run("cli", func(t *testing.T) { testTerminalCLI(t, svc, sb.ID) })
		})
	}
}

func testTerminalWebSocket(t *testing.T, svc *service, sandboxID string) {
	w1 := dialTerm(t, svc, sandboxID, "cols=100&rows=30", svc.e.apiKey)
	id := w1.hello(true)
	w1.send("echo user=$(id -un) size=$(stty size) sum=$((6*7))\n")
	w1.waitOutput("user=sandbox size=30 100 sum=42")

	// Reconnect to the same terminal: an observer, replay first.
	w2 := dialTerm(t, svc, sandboxID, "terminal="+id, svc.e.apiKey)
	if got := w2.hello(false); got != id {
		t.Fatalf("second connection is on terminal %s, want %s", got, id)
	}
	w2.waitOutput("sum=42")
	// The observer's input is dropped: after its takeover (same connection,
	// so anything forwarded would come first) only the new input shows.
	w2.send("echo observer-$((1+1))\n")
	w1.send("echo writer-$((2+3))\n")
	w2.waitOutput("writer-5")
	w2.control(map[string]string{"type": "takeover"})
	w2.waitFor("writer message", func() bool { return w2.hasWriter(true) })
	w1.waitFor("demotion message", func() bool { return w1.hasWriter(false) })
	w1.send("echo demoted-$((3+3))\n")
	w2.control(map[string]any{"type": "resize", "cols": 120, "rows": 40})
	w2.send("echo taken-$((4+4)) size=$(stty size)\n")
	w1.waitOutput("taken-8 size=40 120")
	w2.waitOutput("taken-8 size=40 120")

	// A third connection takes over at once and ends the shell.
	w3 := dialTerm(t, svc, sandboxID, "terminal="+id+"&takeover=1", svc.e.apiKey)
	w3.hello(true)
	w3.waitOutput("taken-8")
	w3.send("echo last-$((5+5)); exit 3\n")
	for _, c := range []*termConn{w1, w2, w3} {
		c.waitOutput("last-10")
		if code := c.waitExit(); code != 3 {
			t.Fatalf("exit code %d, want 3", code)
		}
		if out := c.output(); strings.Contains(out, "observer-2") || strings.Contains(out, "demoted-6") {
			t.Fatalf("input of an observer reached the terminal: %q", out)
		}
	}

	// Unknown terminals and other tenants get 404 before any upgrade.
	for _, q := range []string{"terminal=term_0000000000000000", "terminal=nope"} {
		if status := dialStatus(t, svc, sandboxID, q, svc.e.apiKey); status != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", q, status)
		}
	}
	if status := dialStatus(t, svc, sandboxID, "terminal="+id, "wrong-key-0123456789abcdef"); status != http.StatusUnauthorized {
		t.Errorf("wrong key: status %d, want 401", status)
	}
}

func testTerminalCLI(t *testing.T, svc *service, sandboxID string) {
	cmd := exec.Command(filepath.Join(binDir, "genesis"), "shell", sandboxID)
	cmd.Env = append(os.Environ(), client.EnvURL+"="+svc.url(), client.EnvAPIKey+"="+svc.e.apiKey, "TERM=xterm")
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 90, Rows: 25})
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	done := make(chan struct{}) // closed when the CLI has exited; then waitErr is set
	var waitErr error
	var screen lockedBuffer
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			screen.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	go func() { waitErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
			<-done
		}
	})
	waitScreen := func(want string) {
		t.Helper()
		deadline := time.Now().Add(termWait)
		for !strings.Contains(screen.String(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q on the screen within %v: %q", want, termWait, screen.String())
			}
			time.Sleep(pollEvery)
		}
	}
	waitScreen("(reconnect or watch with --terminal term_")
	ptmx.Write([]byte("echo hi-$((20+22)); stty size\r"))
	waitScreen("hi-42\r\n25 90")
	// Resizing the local terminal sends SIGWINCH to the CLI, which passes
	// the size on.
	if err := pty.Setsize(ptmx, &pty.Winsize{Cols: 132, Rows: 43}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(termWait)
	for !strings.Contains(screen.String(), "43 132") {
		if time.Now().After(deadline) {
			t.Fatalf("the resize did not reach the terminal: %q", screen.String())
		}
		ptmx.Write([]byte("stty size\r"))
		time.Sleep(500 * time.Millisecond)
	}
	ptmx.Write([]byte("exit 3\r"))
	select {
	case <-done:
		var ee *exec.ExitError
		if !errors.As(waitErr, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("genesis shell ended with %v, want exit status 3; screen %q", waitErr, screen.String())
		}
	case <-time.After(termWait):
		t.Fatalf("genesis shell did not exit; screen %q", screen.String())
	}
}

// termConn is one terminal WebSocket: a reader goroutine collects output
// bytes and control messages.
type termConn struct {
	t    *testing.T
	ws   *websocket.Conn
	ctx  context.Context
	done chan struct{}

	mu       sync.Mutex
	out      bytes.Buffer
	msgs     []termMessage
	closeErr error
}

type termMessage struct {
	Type     string `json:"type"`
	Terminal string `json:"terminal"`
	Writer   *bool  `json:"writer"`
	Code     *int   `json:"code"`
}

func termURL(svc *service, sandboxID, query string) string {
	u := "ws://" + svc.addr + "/v1/sandboxes/" + sandboxID + "/terminal"
	if query != "" {
		u += "?" + query
	}
	return u
}

func dialTerm(t *testing.T, svc *service, sandboxID, query, key string) *termConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*termWait)
	ws, resp, err := websocket.Dial(ctx, termURL(svc, sandboxID, query), &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + key}},
	})
	if err != nil {
		cancel()
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("terminal websocket %s: %v (status %d)", query, err, status)
	}
	c := &termConn{t: t, ws: ws, ctx: ctx, done: make(chan struct{})}
	t.Cleanup(func() { ws.CloseNow(); cancel(); <-c.done })
	go func() {
		defer close(c.done)
		for {
			typ, data, err := ws.Read(ctx)
			c.mu.Lock()
			if err != nil {
				c.closeErr = err
				c.mu.Unlock()
				return
			}
			if typ == websocket.MessageBinary {
				c.out.Write(data)
			} else {
				var m termMessage
				if json.Unmarshal(data, &m) != nil {
					m.Type = "undecodable " + string(data)
				}
				c.msgs = append(c.msgs, m)
			}
			c.mu.Unlock()
		}
	}()
	return c
}

// dialStatus returns the HTTP status of a refused upgrade (0 if accepted).
func dialStatus(t *testing.T, svc *service, sandboxID, query, key string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, termURL(svc, sandboxID, query), &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + key}},
	})
	if err == nil {
		ws.CloseNow()
		return 0
	}
	if resp == nil {
		t.Fatalf("terminal websocket %s: %v", query, err)
	}
	return resp.StatusCode
}

func (c *termConn) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

func (c *termConn) messages() []termMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]termMessage(nil), c.msgs...)
}

func (c *termConn) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(termWait)
	for !cond() {
		select {
		case <-c.done:
			if cond() {
				return
			}
			c.t.Fatalf("connection closed (%v) before %s; output %q, messages %+v", c.closeErr, what, c.output(), c.messages())
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no %s within %v; output %q, messages %+v", what, termWait, c.output(), c.messages())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *termConn) waitOutput(want string) {
	c.t.Helper()
	c.waitFor("output "+want, func() bool { return strings.Contains(c.output(), want) })
}

// hello checks the first message and returns the terminal id.
func (c *termConn) hello(writer bool) string {
	c.t.Helper()
	c.waitFor("hello", func() bool { return len(c.messages()) > 0 })
	m := c.messages()[0]
	if m.Type != "hello" || m.Terminal == "" || m.Writer == nil || *m.Writer != writer {
		c.t.Fatalf("first message %+v, want hello with writer=%v", m, writer)
	}
	return m.Terminal
}

func (c *termConn) hasWriter(writer bool) bool {
	for _, m := range c.messages()[1:] {
		if m.Type == "writer" && m.Writer != nil && *m.Writer == writer {
			return true
		}
	}
	return false
}

func (c *termConn) send(s string) {
	c.t.Helper()
	if err := c.ws.Write(c.ctx, websocket.MessageBinary, []byte(s)); err != nil {
		c.t.Fatalf("send %q: %v", s, err)
	}
}

func (c *termConn) control(v any) {
	c.t.Helper()
	b, _ := json.Marshal(v)
	if err := c.ws.Write(c.ctx, websocket.MessageText, b); err != nil {
		c.t.Fatalf("send %s: %v", b, err)
	}
}

// waitExit waits for the exit message and the normal closure after it.
func (c *termConn) waitExit() int {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(termWait):
		c.t.Fatalf("connection not closed within %v; messages %+v", termWait, c.messages())
	}
	msgs := c.messages()
	if len(msgs) == 0 || msgs[len(msgs)-1].Type != "exit" || msgs[len(msgs)-1].Code == nil {
		c.t.Fatalf("messages %+v: want an exit message last", msgs)
	}
	if st := websocket.CloseStatus(c.closeErr); st != websocket.StatusNormalClosure {
		c.t.Fatalf("closed with %v, want a normal closure", c.closeErr)
	}
	return *msgs[len(msgs)-1].Code
}
