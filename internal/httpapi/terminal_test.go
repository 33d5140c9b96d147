package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"genesis.dev/sandbox/client"
)

// termWait bounds every wait on terminal output; the machine is loaded.
const termWait = 30 * time.Second

// termMsg is a text message of the terminal WebSocket.
type termMsg struct {
	Type     string `json:"type"`
	Terminal string `json:"terminal"`
	Writer   *bool  `json:"writer"`
	Code     *int   `json:"code"`
	Reason   string `json:"reason"`
	Signal   string `json:"signal"`
}

// termClient is one WebSocket connection to a terminal: a reader goroutine
// collects the output bytes and the control messages.
type termClient struct {
	t    *testing.T
	ws   *websocket.Conn
	ctx  context.Context
	done chan struct{}

	mu       sync.Mutex
	out      bytes.Buffer
	msgs     []termMsg
	closeErr error
}

func (a *api) dialTerminal(sandboxID, query, key string) (*termClient, *http.Response, error) {
	a.T.Helper()
	u := strings.Replace(a.url, "http://", "ws://", 1) + "/v1/sandboxes/" + sandboxID + "/terminal"
	if query != "" {
		u += "?" + query
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*termWait)
	h := http.Header{}
	if key != "" {
		h.Set("Authorization", "Bearer "+key)
	}
	ws, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		cancel()
		return nil, resp, err
	}
	c := &termClient{t: a.T, ws: ws, ctx: ctx, done: make(chan struct{})}
	a.T.Cleanup(func() { ws.CloseNow(); cancel(); <-c.done })
	go c.read()
	return c, resp, nil
}

func (a *api) openTerminal(sandboxID, query string) *termClient {
	a.T.Helper()
	c, resp, err := a.dialTerminal(sandboxID, query, keyA)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		a.T.Fatalf("terminal websocket (%s): %v (status %d)", query, err, status)
	}
	return c
}

func (c *termClient) read() {
	defer close(c.done)
	for {
		typ, data, err := c.ws.Read(c.ctx)
		c.mu.Lock()
		if err != nil {
			c.closeErr = err
			c.mu.Unlock()
			return
		}
		if typ == websocket.MessageBinary {
			c.out.Write(data)
		} else {
			var m termMsg
			if jerr := json.Unmarshal(data, &m); jerr != nil {
				m.Type = "undecodable: " + string(data)
			}
			c.msgs = append(c.msgs, m)
		}
		c.mu.Unlock()
	}
}

func (c *termClient) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

func (c *termClient) messages() []termMsg {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]termMsg(nil), c.msgs...)
}

// waitOutput polls until the output contains want.
func (c *termClient) waitOutput(want string) {
	c.t.Helper()
	c.waitCond("output "+want, func() bool { return strings.Contains(c.output(), want) })
}

// waitMsg polls until the n-th (0-based) message arrived and returns it.
func (c *termClient) waitMsg(n int) termMsg {
	c.t.Helper()
	c.waitCond("message", func() bool { return len(c.messages()) > n })
	return c.messages()[n]
}

func (c *termClient) waitCond(what string, cond func() bool) {
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
		time.Sleep(5 * time.Millisecond)
	}
}

func (c *termClient) send(s string) {
	c.t.Helper()
	if err := c.ws.Write(c.ctx, websocket.MessageBinary, []byte(s)); err != nil {
		c.t.Fatalf("send %q: %v", s, err)
	}
}

func (c *termClient) control(v any) {
	c.t.Helper()
	b, _ := json.Marshal(v)
	if err := c.ws.Write(c.ctx, websocket.MessageText, b); err != nil {
		c.t.Fatalf("send %s: %v", b, err)
	}
}

// hello checks the first message and returns the terminal id.
func (c *termClient) hello(writer bool) string {
	c.t.Helper()
	m := c.waitMsg(0)
	if m.Type != "hello" || m.Terminal == "" || m.Writer == nil || *m.Writer != writer {
		c.t.Fatalf("first message %+v, want hello with writer=%v", m, writer)
	}
	return m.Terminal
}

// waitExit waits for the exit message and the normal closure after it.
func (c *termClient) waitExit() int {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(termWait):
		c.t.Fatalf("connection not closed within %v; messages %+v", termWait, c.messages())
	}
	msgs := c.messages()
	last := msgs[len(msgs)-1]
	if last.Type != "exit" || last.Code == nil {
		c.t.Fatalf("last message %+v, want exit", last)
	}
	if st := websocket.CloseStatus(c.closeErr); st != websocket.StatusNormalClosure {
		c.t.Fatalf("closed with %v (status %d), want a normal closure", c.closeErr, st)
	}
	return *last.Code
}

func hasWriterMsg(msgs []termMsg, writer bool) bool {
	for _, m := range msgs[1:] {
		if m.Type == "writer" && m.Writer != nil && *m.Writer == writer {
			return true
		}
	}
	return false
}

func TestTerminalWebSocketRoles(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	sb, _ := a.createHTTP(keyA, client.CreateSandboxRequest{})

	w1 := a.openTerminal(sb.ID, "cols=100&rows=30")
	id := w1.hello(true)
	w1.send("echo hi-$((6*7)) size=$(stty size)\n")
	w1.waitOutput("hi-42 size=30 100")

	// A second connection observes and first gets the recent output.
	w2 := a.openTerminal(sb.ID, "terminal="+id)
	if got := w2.hello(false); got != id {
		t.Fatalf("reconnect hello names %s, want %s", got, id)
	}
	w2.waitOutput("hi-42")
	// The observer's input and resize are dropped. (Its takeover below goes
	// through the same connection, so anything forwarded would arrive first.)
	w2.send("echo obs-$((1+1))\n")
	w2.control(map[string]any{"type": "resize", "cols": 50, "rows": 10})
	w1.send("echo w1-$((2+3))\n")
	w1.waitOutput("w1-5")
	w2.waitOutput("w1-5")

	w2.control(map[string]string{"type": "takeover"})
	w2.waitCond("writer message", func() bool { return hasWriterMsg(w2.messages(), true) })
	w1.waitCond("demotion message", func() bool { return hasWriterMsg(w1.messages(), false) })
	w2.send("echo w2-$((3+4)) size=$(stty size)\n")
	w2.waitOutput("w2-7 size=30 100")
	w1.waitOutput("w2-7")
	// The demoted writer's input is dropped now.
	w1.send("echo old-$((4+4))\n")
	w2.control(map[string]any{"type": "resize", "cols": 120, "rows": 40})
	w2.send("echo size=$(stty size)\n")
	w2.waitOutput("size=40 120")
	for _, c := range []*termClient{w1, w2} {
		if out := c.output(); strings.Contains(out, "obs-2") || strings.Contains(out, "size=10 50") {
			t.Fatalf("an observer's input reached the terminal: %q", out)
		}
	}

	// Reconnect with takeover: replay first, writer at once.
	w3 := a.openTerminal(sb.ID, "terminal="+id+"&takeover=1")
	w3.hello(true)
	w3.waitOutput("w2-7")
	w2.waitCond("demotion message", func() bool { return hasWriterMsg(w2.messages(), false) })
	w3.send("echo w3-$((5+5)); exit 3\n")
	for _, c := range []*termClient{w1, w2, w3} {
		c.waitOutput("w3-10")
		if code := c.waitExit(); code != 3 {
			t.Fatalf("exit code %d, want 3", code)
		}
	}
	if out := w3.output(); strings.Contains(out, "old-8") {
		t.Fatalf("the demoted writer's input reached the terminal: %q", out)
	}
	// An ended terminal still replays, then reports its exit.
	late := a.openTerminal(sb.ID, "terminal="+id)
	late.hello(true)
	late.waitOutput("w3-10")
	if code := late.waitExit(); code != 3 {
		t.Fatalf("late exit code %d, want 3", code)
	}
}

func TestTerminalWebSocketNewTerminals(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	sb, _ := a.createHTTP(keyA, client.CreateSandboxRequest{})
	c1 := a.openTerminal(sb.ID, "")
	c2 := a.openTerminal(sb.ID, "")
	id1, id2 := c1.hello(true), c2.hello(true)
	if id1 == id2 {
		t.Fatalf("two new terminals share id %s", id1)
	}
	c2.send("echo two-$((1+1))\n")
	c2.waitOutput("two-2")
	c1.send("echo one-$((0+1)); exit 0\n")
	if code := c1.waitExit(); code != 0 || strings.Contains(c1.output(), "two-2") {
		t.Fatalf("terminal 1: exit %d, output %q", code, c1.output())
	}
	// A client that goes away leaves its terminal running.
	c2.ws.Close(websocket.StatusNormalClosure, "bye")
	<-c2.done
	again := a.openTerminal(sb.ID, "terminal="+id2)
	again.hello(true)
	again.waitOutput("two-2")
	again.send("echo still-$((2+2))\n")
	again.waitOutput("still-4")
}

func TestTerminalWebSocketErrors(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	sb, _ := a.createHTTP(keyA, client.CreateSandboxRequest{})
	tests := []struct {
		name, sandbox, query, key string
		status                    int
		code                      string
	}{
		{"no key", sb.ID, "", "", http.StatusUnauthorized, "unauthenticated"},
		{"other tenant", sb.ID, "", keyB, http.StatusNotFound, ""},
		{"unknown sandbox", "sbx_0000000000000000", "", keyA, http.StatusNotFound, ""},
		{"unknown terminal", sb.ID, "terminal=term_0000000000000000", keyA, http.StatusNotFound, "terminal_not_found"},
		{"malformed terminal id", sb.ID, "terminal=../x", keyA, http.StatusNotFound, "terminal_not_found"},
		{"bad cols", sb.ID, "cols=-1", keyA, http.StatusBadRequest, ""},
		{"huge rows", sb.ID, "rows=70000", keyA, http.StatusBadRequest, "invalid_terminal_size"},
		{"bad takeover", sb.ID, "takeover=maybe", keyA, http.StatusBadRequest, ""},
	}
	for _, tt := range tests {
		_, resp, err := a.dialTerminal(tt.sandbox, tt.query, tt.key)
		if err == nil || resp == nil || resp.StatusCode != tt.status {
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			t.Errorf("%s: err %v, status %d; want %d before the upgrade", tt.name, err, status, tt.status)
			continue
		}
		var p client.Problem
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
			t.Errorf("%s: problem body: %v", tt.name, err)
		} else if tt.code != "" && p.Code != tt.code {
			t.Errorf("%s: code %q, want %q", tt.name, p.Code, tt.code)
		}
	}
	// A plain GET is refused without creating a terminal.
	resp, body := a.do(req{method: "GET", path: "/v1/sandboxes/" + sb.ID + "/terminal", key: keyA})
	checkProblem(t, resp, body, http.StatusBadRequest, "websocket_required")

	// The other tenant cannot reach an existing terminal either.
	c := a.openTerminal(sb.ID, "")
	id := c.hello(true)
	if _, resp, err := a.dialTerminal(sb.ID, "terminal="+id, keyB); err == nil || resp == nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("tenant b reached tenant a's terminal: %v", err)
	}
	// Malformed control messages end the connection with 1003.
	c.ws.Write(c.ctx, websocket.MessageText, []byte("{not json"))
	<-c.done
	if st := websocket.CloseStatus(c.closeErr); st != websocket.StatusUnsupportedData {
		t.Fatalf("after a malformed control message: %v, want close status 1003", c.closeErr)
	}
	if errors.Is(c.closeErr, context.DeadlineExceeded) {
		t.Fatal("timed out")
	}
}
