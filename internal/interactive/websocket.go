package interactive

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/coder/websocket"

	"genesis.dev/sandbox/api"
)

// The terminal WebSocket (GET /v1/sandboxes/{id}/terminal) carries one
// interactive terminal. Query: terminal=<id> reconnects to an existing
// terminal (otherwise a new one runs the sandbox user's shell), cols and
// rows set the window size, takeover=1 makes this connection the writer.
//
// Binary messages are raw terminal bytes both ways. Text messages are JSON
// control messages:
//
//	client → server  {"type":"resize","cols":N,"rows":N}   (writer only)
//	                 {"type":"takeover"}
//	server → client  {"type":"hello","terminal":"<id>","writer":bool}   first
//	                 {"type":"writer","writer":bool}        the role changed
//	                 {"type":"exit","code":N,"reason":"exited|signal","signal":"SIG…"}   last
//
// The first connection to a terminal is its writer; later ones observe:
// their input and resizes are ignored (hello says writer false). On a
// reconnect the recent output (the last 64 KiB) comes first. After the exit
// message the server closes with status 1000; if the connection to the
// sandbox is lost it closes with 1011 and the terminal may still run.

// Terminal WebSocket limits and timings.
const (
	terminalReadLimit   = 1 << 20
	terminalPingEvery   = 30 * time.Second
	terminalPingTimeout = 20 * time.Second
	// WebSocketWriteWait bounds one write to the client.
	WebSocketWriteWait = 30 * time.Second
)

// ServeWebSocket pumps one terminal connection over ws (accepted by the
// edge) until the process exits, the client goes away or the connection to
// the sandbox is lost; it closes ws and conn.
func ServeWebSocket(ctx context.Context, ws *websocket.Conn, conn *TerminalConn, log *slog.Logger) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		conn.Close()
		ws.CloseNow()
		wg.Wait()
	}()
	ws.SetReadLimit(terminalReadLimit)
	send := func(m api.TerminalMessage) error {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		wctx, wcancel := context.WithTimeout(ctx, WebSocketWriteWait)
		defer wcancel()
		return ws.Write(wctx, websocket.MessageText, b)
	}
	writer := conn.Writer()
	if err := send(api.TerminalMessage{Type: "hello", Terminal: conn.ID(), Writer: &writer}); err != nil {
		return
	}

	wg.Add(3)
	go func() { // role changes
		defer wg.Done()
		sent := writer
		for {
			select {
			case <-ctx.Done():
				return
			case <-conn.RoleChanged():
			}
			if now := conn.Writer(); now != sent {
				sent = now
				if send(api.TerminalMessage{Type: "writer", Writer: &now}) != nil {
					cancel()
					return
				}
			}
		}
	}()
	go func() { // client → terminal
		defer wg.Done()
		defer conn.Close() // the client is gone: end the output pump too
		defer cancel()
		for {
			typ, data, err := ws.Read(ctx)
			if err != nil {
				return
			}
			if typ == websocket.MessageBinary {
				if _, err := conn.Input(data); err != nil {
					log.Debug("terminal input", "err", err)
					return
				}
				continue
			}
			var m api.TerminalMessage
			if err := json.Unmarshal(data, &m); err != nil {
				ws.Close(websocket.StatusUnsupportedData, "text messages must be JSON control messages")
				return
			}
			switch m.Type {
			case "resize":
				if _, err := conn.Resize(ctx, m.Cols, m.Rows); err != nil {
					log.Debug("terminal resize", "cols", m.Cols, "rows", m.Rows, "err", err)
				}
			case "takeover":
				conn.Takeover()
			default:
				log.Debug("unknown terminal control message ignored", "type", m.Type)
			}
		}
	}()
	go func() { // keepalive: a dead peer is noticed
		defer wg.Done()
		t := time.NewTicker(terminalPingEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			pctx, pcancel := context.WithTimeout(ctx, terminalPingTimeout)
			err := ws.Ping(pctx)
			pcancel()
			if err != nil {
				cancel()
				conn.Close()
				return
			}
		}
	}()

	// terminal → client
	for {
		ev, err := conn.Next()
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("terminal stream lost", "err", err)
				ws.Close(websocket.StatusInternalError, "connection to the sandbox lost")
			}
			return
		}
		if ev.Exit != nil {
			code := ev.Exit.ExitCode
			if send(api.TerminalMessage{Type: "exit", Code: &code, Reason: ev.Exit.ExitReason, Signal: ev.Exit.Signal}) == nil {
				ws.Close(websocket.StatusNormalClosure, "exited")
			}
			return
		}
		wctx, wcancel := context.WithTimeout(ctx, WebSocketWriteWait)
		err = ws.Write(wctx, websocket.MessageBinary, ev.Output)
		wcancel()
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				log.Debug("terminal output", "err", err)
			}
			return
		}
	}
}
