package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"genesis.dev/sandbox/internal/errdefs"
)

// version is Chromium's /json/version answer.
type version struct {
	Browser              string `json:"Browser"`
	WebSocketDebuggerURL string `json:"webSocketDebuggerUrl"`
}

// httpClient is an HTTP client whose every connection is a dial of the
// sandbox's CDP port through its agent.
func httpClient(t *Target) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return t.Dial(ctx, t.Spec.CDPPort) },
		DisableKeepAlives: true,
	}}
}

// sessionClient is httpClient for the session's DevTools WebSocket: its
// connection is the agent's raw dial where the agent gives one
// (Target.DialRaw), each DevTools message then costs no framing or
// hand-off in the agent or here.
func sessionClient(t *Target) *http.Client {
	if t.DialRaw == nil {
		return httpClient(t)
	}
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := t.DialRaw(ctx, t.Spec.CDPPort)
			if errors.Is(err, errdefs.ErrNotImplemented) {
				return t.Dial(ctx, t.Spec.CDPPort)
			}
			return c, err
		},
		DisableKeepAlives: true,
	}}
}

// fetchVersion asks the sandbox's Chromium for /json/version.
func fetchVersion(ctx context.Context, t *Target) (*version, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	host := "127.0.0.1:" + strconv.Itoa(t.Spec.CDPPort)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/json/version", nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient(t).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("chromium answered /json/version with %s: %w", resp.Status, errdefs.ErrBadGateway)
	}
	var v version
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&v); err != nil {
		return nil, fmt.Errorf("chromium's /json/version: %v: %w", err, errdefs.ErrBadGateway)
	}
	return &v, nil
}

// maxMessage bounds one CDP message read (a full-page screenshot is one).
const maxMessage = 256 << 20

// wsConn is a chromedp.Transport over a WebSocket dialled through the
// sandbox's agent. Besides chromedp's commands it sends the session's own
// (send): several in one go, in order, without waiting for each answer.
type wsConn struct {
	c      *websocket.Conn
	mu     sync.Mutex
	debugf func(string, ...any)

	// next is the id of the last own command; own ids start at ownIDs.
	next atomic.Int64
	wmu  sync.Mutex
	// waiting holds the replies awaited, by id; lost is why the
	// connection ended (nil while it is up).
	waiting map[int64]waiter
	lost    error

	// pmu guards pushes: by session, the payloads of the click binding's
	// calls (clickBinding) not yet taken.
	pmu    sync.Mutex
	pushes map[target.SessionID]chan string
	// worlds are, by session, the actions worlds (clickWorld) the
	// browser reported live, by frame.
	worlds map[target.SessionID][]liveWorld
}

// liveWorld is an actions world the browser reported.
type liveWorld struct {
	frame  string
	id     runtime.ExecutionContextID
	unique string
}

// waiter awaits the reply to one own command sent to session.
type waiter struct {
	session target.SessionID
	ch      chan reply
}

// reply is an own command's answer, or why none comes.
type reply struct {
	msg *cdproto.Message
	err error
}

// ownIDs is where the ids of the session's own commands start: far above
// chromedp's, which count from 1, and within the 32-bit integer Chromium
// takes as an id.
const ownIDs = 1 << 30

// SetDebugf is the protocol logger chromedp.NewBrowserTransport sets.
func (w *wsConn) SetDebugf(f func(string, ...any)) { w.debugf = f }

// dialCDP connects to the browser's DevTools WebSocket.
func dialCDP(ctx context.Context, t *Target) (*wsConn, error) {
	v, err := fetchVersion(ctx, t)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(v.WebSocketDebuggerURL)
	if err != nil || u.Path == "" {
		return nil, fmt.Errorf("chromium's webSocketDebuggerUrl %q: %w", v.WebSocketDebuggerURL, errdefs.ErrBadGateway)
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(dctx, "ws://127.0.0.1:"+strconv.Itoa(t.Spec.CDPPort)+u.Path, &websocket.DialOptions{HTTPClient: sessionClient(t)})
	if err != nil {
		return nil, fmt.Errorf("connecting to the browser of sandbox %s: %v: %w", t.SandboxID, err, errdefs.ErrBadGateway)
	}
	c.SetReadLimit(maxMessage)
	return &wsConn{c: c}, nil
}

// Read reads the next message for chromedp. The replies to the session's
// own commands are taken out here, in the order they arrive.
func (w *wsConn) Read(ctx context.Context, msg *cdproto.Message) error {
	for {
		_, data, err := w.c.Read(ctx)
		if err != nil {
			w.fail(err)
			return err
		}
		if w.debugf != nil {
			w.debugf("<- %s", data)
		}
		*msg = cdproto.Message{}
		if err := jsonv2.Unmarshal(data, msg, chromedp.DefaultUnmarshalOptions); err != nil {
			return err
		}
		switch msg.Method {
		case cdproto.EventTargetDetachedFromTarget:
			w.detached(msg.Params)
		case cdproto.EventRuntimeBindingCalled:
			w.pushed(msg.SessionID, msg.Params)
		case cdproto.EventRuntimeExecutionContextCreated, cdproto.EventRuntimeExecutionContextDestroyed, cdproto.EventRuntimeExecutionContextsCleared:
			w.contexts(msg.SessionID, msg.Method, msg.Params)
		}
		if msg.ID < ownIDs || msg.Method != "" {
			return nil
		}
		w.wmu.Lock()
		wt, ok := w.waiting[msg.ID]
		delete(w.waiting, msg.ID)
		w.wmu.Unlock()
		if ok {
			wt.ch <- reply{msg: &cdproto.Message{ID: msg.ID, Result: msg.Result, Error: msg.Error}}
		}
	}
}

// detached ends the wait of the own commands sent to a session the
// browser detached (its page closed): no reply comes for them.
func (w *wsConn) detached(params []byte) {
	var ev target.EventDetachedFromTarget
	if jsonv2.Unmarshal(params, &ev, chromedp.DefaultUnmarshalOptions) != nil || ev.SessionID == "" {
		return
	}
	w.pmu.Lock()
	delete(w.pushes, ev.SessionID)
	delete(w.worlds, ev.SessionID)
	w.pmu.Unlock()
	w.wmu.Lock()
	defer w.wmu.Unlock()
	for id, wt := range w.waiting {
		if wt.session == ev.SessionID {
			wt.ch <- reply{err: fmt.Errorf("session %s: %w: inspected target navigated or closed", ev.SessionID, chromedp.ErrTargetDetached)}
			delete(w.waiting, id)
		}
	}
}

// pushed keeps the payload of a call of the click binding in session's
// page (the page's answer after a click, clickAnswer), for listen's
// reader. A full buffer drops its oldest: the reader wants the newest
// click's.
func (w *wsConn) pushed(session target.SessionID, params []byte) {
	var ev runtime.EventBindingCalled
	if jsonv2.Unmarshal(params, &ev, chromedp.DefaultUnmarshalOptions) != nil || ev.Name != clickBinding {
		return
	}
	ch := w.listen(session)
	for {
		select {
		case ch <- ev.Payload:
			return
		default:
			select {
			case <-ch:
			default:
			}
		}
	}
}

// contexts follows the actions worlds of session's page from the
// browser's events of its execution contexts.
func (w *wsConn) contexts(session target.SessionID, method cdproto.MethodType, params []byte) {
	w.pmu.Lock()
	defer w.pmu.Unlock()
	switch method {
	case cdproto.EventRuntimeExecutionContextCreated:
		var ev runtime.EventExecutionContextCreated
		if jsonv2.Unmarshal(params, &ev, chromedp.DefaultUnmarshalOptions) != nil || ev.Context == nil || ev.Context.Name != clickWorld {
			return
		}
		var aux struct {
			FrameID string `json:"frameId"`
		}
		if json.Unmarshal(ev.Context.AuxData, &aux) != nil || aux.FrameID == "" {
			return
		}
		if w.worlds == nil {
			w.worlds = map[target.SessionID][]liveWorld{}
		}
		w.worlds[session] = append(w.worlds[session], liveWorld{aux.FrameID, ev.Context.ID, ev.Context.UniqueID})
	case cdproto.EventRuntimeExecutionContextDestroyed:
		var ev struct {
			ID     runtime.ExecutionContextID `json:"executionContextId"`
			Unique string                     `json:"executionContextUniqueId"`
		}
		if jsonv2.Unmarshal(params, &ev, chromedp.DefaultUnmarshalOptions) != nil {
			return
		}
		w.worlds[session] = slices.DeleteFunc(w.worlds[session], func(lw liveWorld) bool {
			return (ev.Unique != "" && lw.unique == ev.Unique) || (ev.Unique == "" && lw.id == ev.ID)
		})
	case cdproto.EventRuntimeExecutionContextsCleared:
		delete(w.worlds, session)
	}
}

// world is the newest live actions world of frame in session's page (0
// if there is none).
func (w *wsConn) world(session target.SessionID, frame string) runtime.ExecutionContextID {
	w.pmu.Lock()
	defer w.pmu.Unlock()
	ws := w.worlds[session]
	for i := len(ws) - 1; i >= 0; i-- {
		if ws[i].frame == frame {
			return ws[i].id
		}
	}
	return 0
}

// listen is the channel of session's click binding payloads.
func (w *wsConn) listen(session target.SessionID) chan string {
	w.pmu.Lock()
	defer w.pmu.Unlock()
	if w.pushes == nil {
		w.pushes = map[target.SessionID]chan string{}
	}
	ch, ok := w.pushes[session]
	if !ok {
		ch = make(chan string, 4)
		w.pushes[session] = ch
	}
	return ch
}

// fail ends the wait of every own command: the connection is gone.
func (w *wsConn) fail(err error) {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if w.lost == nil {
		w.lost = fmt.Errorf("lost the connection to the browser: %w", err)
	}
	for id, wt := range w.waiting {
		wt.ch <- reply{err: w.lost}
		delete(w.waiting, id)
	}
}

// command is one CDP command of the session's own; Result, if set,
// receives its answer.
type command struct {
	Method string
	Params any
	Result any
}

// send sends cmds to the target of session in order, each as soon as the
// one before is written, and waits for all the answers: a sequence of
// commands the browser runs in the order it receives them (as it does
// the Input domain's) costs one round trip through the sandbox's agent
// instead of one each. The first command that failed says why.
func (w *wsConn) send(ctx context.Context, session target.SessionID, cmds ...command) error {
	chans := make([]chan reply, len(cmds))
	msgs := make([][]byte, len(cmds))
	ids := make([]int64, len(cmds))
	for i, c := range cmds {
		params, err := jsonv2.Marshal(c.Params, chromedp.DefaultMarshalOptions)
		if err != nil {
			return err
		}
		ids[i] = ownIDs + w.next.Add(1)
		msgs[i], err = jsonv2.Marshal(&cdproto.Message{ID: ids[i], SessionID: session, Method: cdproto.MethodType(c.Method), Params: params}, chromedp.DefaultMarshalOptions)
		if err != nil {
			return err
		}
		chans[i] = make(chan reply, 1)
	}
	w.wmu.Lock()
	if w.lost != nil {
		w.wmu.Unlock()
		return w.lost
	}
	if w.waiting == nil {
		w.waiting = map[int64]waiter{}
	}
	for i, id := range ids {
		w.waiting[id] = waiter{session, chans[i]}
	}
	w.wmu.Unlock()
	defer func() {
		w.wmu.Lock()
		for _, id := range ids {
			delete(w.waiting, id)
		}
		w.wmu.Unlock()
	}()
	// A write cut by its context closes the WebSocket: the writes go
	// under the connection's life, as chromedp's own do, and only the
	// wait for the answers ends with ctx.
	wctx := context.WithoutCancel(ctx)
	for _, b := range msgs {
		if w.debugf != nil {
			w.debugf("-> %s", b)
		}
		w.mu.Lock()
		err := w.c.Write(wctx, websocket.MessageText, b)
		w.mu.Unlock()
		if err != nil {
			return err
		}
	}
	var first error
	for i, ch := range chans {
		select {
		case r := <-ch:
			switch {
			case r.err != nil:
				return r.err
			case r.msg.Error != nil && first == nil:
				first = r.msg.Error
			case r.msg.Error == nil && cmds[i].Result != nil && first == nil:
				if err := jsonv2.Unmarshal(r.msg.Result, cmds[i].Result, chromedp.DefaultUnmarshalOptions); err != nil {
					first = err
				}
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return first
}

func (w *wsConn) Write(ctx context.Context, msg *cdproto.Message) error {
	b, err := jsonv2.Marshal(msg, chromedp.DefaultMarshalOptions)
	if err != nil {
		return err
	}
	if w.debugf != nil {
		w.debugf("-> %s", b)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.c.Write(ctx, websocket.MessageText, b)
}

func (w *wsConn) Close() error { return w.c.Close(websocket.StatusNormalClosure, "") }

// allocator attaches chromedp to the sandbox's running browser.
type allocator struct {
	t  *Target
	wg sync.WaitGroup
	// conn is the connection once Allocate made it.
	conn atomic.Pointer[wsConn]
}

func (a *allocator) Allocate(ctx context.Context, opts ...chromedp.BrowserOption) (*chromedp.Browser, error) {
	if chromedp.FromContext(ctx) == nil {
		return nil, chromedp.ErrInvalidContext
	}
	// The connection lives until ctx ends and chromedp has closed its
	// pages, as chromedp's own remote allocator does.
	wctx, cancel := context.WithCancel(context.Background())
	a.wg.Go(func() {
		<-ctx.Done()
		chromedp.Cancel(ctx)
		cancel()
	})
	conn, err := dialCDP(ctx, a.t)
	if err != nil {
		cancel()
		return nil, err
	}
	a.conn.Store(conn)
	return chromedp.NewBrowserTransport(wctx, conn, opts...)
}

func (a *allocator) Wait()          { a.wg.Wait() }
func (a *allocator) Attaches() bool { return true }
