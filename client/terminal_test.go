package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/coder/websocket"

	"genesis.dev/sandbox/api"
)

// terminalServer serves one terminal WebSocket on loopback: script drives
// the service's side; the upgrade request goes to reqs.
func terminalServer(t *testing.T, script func(ctx context.Context, ws *websocket.Conn)) (*Client, chan *http.Request) {
	t.Helper()
	reqs := make(chan *http.Request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqs <- r
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		script(ctx, ws)
	}))
	t.Cleanup(srv.Close)
	return New(srv.URL, "k", WithUserAgent("ua/1"), WithActAs("acme")), reqs
}

func writeMessage(ctx context.Context, ws *websocket.Conn, m TerminalMessage) {
	b, _ := json.Marshal(m)
	_ = ws.Write(ctx, websocket.MessageText, b)
}

// TestTerminal opens a terminal and goes through a session: the upgrade
// request carries the options and headers, the hello sets ID and Writer,
// input and a resize reach the service, output, a role change and the exit
// come back in order, and Next then says io.EOF.
func TestTerminal(t *testing.T) {
	t.Parallel()
	yes, no, three := true, false, 3
	c, reqs := terminalServer(t, func(ctx context.Context, ws *websocket.Conn) {
		writeMessage(ctx, ws, TerminalMessage{Type: "hello", Terminal: "term_1", Writer: &no})
		// The caller's input, then its resize.
		if typ, b, err := ws.Read(ctx); err != nil || typ != websocket.MessageBinary || string(b) != "ls\n" {
			t.Errorf("input: %v %q %v", typ, b, err)
			return
		}
		var m TerminalMessage
		if typ, b, err := ws.Read(ctx); err != nil || typ != websocket.MessageText || json.Unmarshal(b, &m) != nil || m != (TerminalMessage{Type: "resize", Cols: 100, Rows: 40}) {
			t.Errorf("resize: %v %s %v", typ, b, err)
			return
		}
		_ = ws.Write(ctx, websocket.MessageBinary, []byte("a.txt\r\n"))
		writeMessage(ctx, ws, TerminalMessage{Type: "writer", Writer: &yes})
		writeMessage(ctx, ws, TerminalMessage{Type: "exit", Code: &three, Reason: "exited"})
		_, _, _ = ws.Read(ctx) // the caller's close
	})
	ctx := context.Background()
	term, err := c.OpenTerminal(ctx, "sbx_1", TerminalOptions{Terminal: "term_1", Takeover: true, Cols: 80, Rows: 24})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	r := <-reqs
	if q := r.URL.Query(); r.URL.Path != "/v1/sandboxes/sbx_1/terminal" || q.Get("terminal") != "term_1" || q.Get("takeover") != "1" ||
		q.Get("cols") != "80" || q.Get("rows") != "24" {
		t.Errorf("upgrade request %s", r.URL)
	}
	if r.Header.Get("Authorization") != "Bearer k" || r.Header.Get("User-Agent") != "ua/1" || r.Header.Get(api.HeaderActAs) != "acme" {
		t.Errorf("upgrade headers %v", r.Header)
	}
	if term.ID != "term_1" || term.Writer {
		t.Fatalf("after the hello: %+v", term)
	}
	if err := term.Write(ctx, []byte("ls\n")); err != nil {
		t.Fatal(err)
	}
	if err := term.Resize(ctx, 100, 40); err != nil {
		t.Fatal(err)
	}
	if ev, err := term.Next(ctx); err != nil || string(ev.Output) != "a.txt\r\n" || ev.Message != nil {
		t.Fatalf("output: %+v %v", ev, err)
	}
	if ev, err := term.Next(ctx); err != nil || ev.Message == nil || ev.Message.Type != "writer" || !term.Writer {
		t.Fatalf("writer: %+v %v (writer %v)", ev, err, term.Writer)
	}
	if ev, err := term.Next(ctx); err != nil || ev.Message == nil || ev.Message.Type != "exit" || *ev.Message.Code != 3 {
		t.Fatalf("exit: %+v %v", ev, err)
	}
	if _, err := term.Next(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("after the exit: %v, want io.EOF", err)
	}
}

// TestTerminalClosedAndRefused checks the two ways a terminal fails: a
// connection the service closes before the exit is a *TerminalClosed with
// its status, and a refused upgrade is an *APIError with the problem's code.
func TestTerminalClosedAndRefused(t *testing.T) {
	t.Parallel()
	c, _ := terminalServer(t, func(ctx context.Context, ws *websocket.Conn) {
		writeMessage(ctx, ws, TerminalMessage{Type: "hello", Terminal: "term_2"})
		ws.Close(websocket.StatusInternalError, "connection to the sandbox lost")
	})
	ctx := context.Background()
	term, err := c.OpenTerminal(ctx, "sbx_1", TerminalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	if !term.Writer {
		t.Errorf("a hello without writer: Writer false")
	}
	_, err = term.Next(ctx)
	var tc *TerminalClosed
	if !errors.As(err, &tc) || tc.Status != 1011 || tc.Reason != "connection to the sandbox lost" {
		t.Fatalf("closed: %v", err)
	}

	rc, _ := newTestClient(t, answer{Status: http.StatusNotFound, ContentType: "application/problem+json",
		Body: `{"status":404,"code":"terminal_not_found","detail":"sandbox sbx_1 has no terminal \"term_zz\""}`})
	_, err = rc.OpenTerminal(ctx, "sbx_1", TerminalOptions{Terminal: "term_zz"})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Problem.Code != "terminal_not_found" {
		t.Fatalf("refused: %v", err)
	}
	if _, err := rc.OpenTerminal(ctx, "", TerminalOptions{}); err == nil {
		t.Fatal("an empty sandbox id opened a terminal")
	}
}
