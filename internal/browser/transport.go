package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/chromedp/cdproto"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
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
// sandbox's agent.
type wsConn struct {
	c      *websocket.Conn
	mu     sync.Mutex
	debugf func(string, ...any)
}

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
	c, _, err := websocket.Dial(dctx, "ws://127.0.0.1:"+strconv.Itoa(t.Spec.CDPPort)+u.Path, &websocket.DialOptions{HTTPClient: httpClient(t)})
	if err != nil {
		return nil, fmt.Errorf("connecting to the browser of sandbox %s: %v: %w", t.SandboxID, err, errdefs.ErrBadGateway)
	}
	c.SetReadLimit(maxMessage)
	return &wsConn{c: c}, nil
}

func (w *wsConn) Read(ctx context.Context, msg *cdproto.Message) error {
	_, data, err := w.c.Read(ctx)
	if err != nil {
		return err
	}
	if w.debugf != nil {
		w.debugf("<- %s", data)
	}
	return jsonv2.Unmarshal(data, msg, chromedp.DefaultUnmarshalOptions)
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
	return chromedp.NewBrowserTransport(wctx, conn, opts...)
}

func (a *allocator) Wait()          { a.wg.Wait() }
func (a *allocator) Attaches() bool { return true }
