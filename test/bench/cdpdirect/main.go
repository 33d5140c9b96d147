// Command cdpdirect measures Chromium's DevTools protocol directly: run
// inside a browser sandbox, it connects to the page's WebSocket on the
// sandbox's loopback (no service, no agent in the path) and times the same
// CDP calls the actions API makes for an evaluate, a click and a
// screenshot. BenchmarkBrowser uploads it and compares the actions API
// with it in one run; it is also the tool for trying Chromium flags.
//
// Output: one JSON object, each op's durations in microseconds.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// page is the benchmark's page: a counting button on a gradient as tall as
// the viewport (the same page BenchmarkBrowser sets up).
const page = `document.body.innerHTML = '<button id="b" style="width:200px;height:80px" onclick="this.textContent = +this.textContent + 1">0</button><div style="height:700px;background:linear-gradient(#39f,#f93)"></div>'; true`

// clickTarget finds #b's centre, as the actions API's click does.
const clickTarget = `(() => { const e = document.querySelector('#b'); e.scrollIntoView({block: 'center', inline: 'center', behavior: 'instant'}); const r = e.getBoundingClientRect(); return {x: r.left + r.width / 2, y: r.top + r.height / 2}; })()`

type conn struct {
	c  *websocket.Conn
	id int
}

type cdpError struct {
	Message string `json:"message"`
}

func (c *conn) call(ctx context.Context, method string, params any, out any) error {
	c.id++
	b, err := json.Marshal(map[string]any{"id": c.id, "method": method, "params": params})
	if err != nil {
		return err
	}
	if err := c.c.Write(ctx, websocket.MessageText, b); err != nil {
		return err
	}
	for {
		_, data, err := c.c.Read(ctx)
		if err != nil {
			return err
		}
		var msg struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *cdpError       `json:"error"`
		}
		if err := json.Unmarshal(data, &msg); err != nil {
			return err
		}
		if msg.ID != c.id {
			continue // an event
		}
		if msg.Error != nil {
			return fmt.Errorf("%s: %s", method, msg.Error.Message)
		}
		if out != nil {
			return json.Unmarshal(msg.Result, out)
		}
		return nil
	}
}

// op is one measured operation.
type op func(ctx context.Context, c *conn) error

func evaluate(expr string) op {
	return func(ctx context.Context, c *conn) error {
		var res struct {
			ExceptionDetails any `json:"exceptionDetails"`
		}
		if err := c.call(ctx, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &res); err != nil {
			return err
		}
		if res.ExceptionDetails != nil {
			return fmt.Errorf("evaluate %q threw: %v", expr, res.ExceptionDetails)
		}
		return nil
	}
}

func click(ctx context.Context, c *conn) error {
	var res struct {
		Result struct {
			Value struct{ X, Y float64 } `json:"value"`
		} `json:"result"`
	}
	if err := c.call(ctx, "Runtime.evaluate", map[string]any{"expression": clickTarget, "returnByValue": true, "awaitPromise": true}, &res); err != nil {
		return err
	}
	p := map[string]any{"type": "mousePressed", "x": res.Result.Value.X, "y": res.Result.Value.Y, "button": "left", "clickCount": 1}
	if err := c.call(ctx, "Input.dispatchMouseEvent", p, nil); err != nil {
		return err
	}
	p["type"] = "mouseReleased"
	return c.call(ctx, "Input.dispatchMouseEvent", p, nil)
}

// shot captures the viewport as spec says: format[-quality] followed by
// options: +fast (optimizeForSpeed), +clip (a 100×100 corner: the fixed
// cost of a capture), +nosurface (fromSurface false).
func shot(spec string) (op, error) {
	p := map[string]any{}
	s, opts, _ := strings.Cut(spec, "+")
	for o := range strings.SplitSeq(opts, "+") {
		switch o {
		case "":
		case "fast":
			p["optimizeForSpeed"] = true
		case "clip":
			p["clip"] = map[string]any{"x": 0, "y": 0, "width": 100, "height": 100, "scale": 1}
		case "nosurface":
			p["fromSurface"] = false
		default:
			return nil, fmt.Errorf("screenshot option %q", o)
		}
	}
	format, q, _ := strings.Cut(s, "-")
	switch format {
	case "png", "jpeg", "webp":
		p["format"] = format
	default:
		return nil, fmt.Errorf("screenshot format %q", format)
	}
	if q != "" {
		var n int
		if _, err := fmt.Sscan(q, &n); err != nil {
			return nil, fmt.Errorf("quality %q", q)
		}
		p["quality"] = n
	}
	return func(ctx context.Context, c *conn) error {
		var res struct {
			Data []byte `json:"data"`
		}
		if err := c.call(ctx, "Page.captureScreenshot", p, &res); err != nil {
			return err
		}
		if len(res.Data) < 100 {
			return fmt.Errorf("a screenshot of %d bytes", len(res.Data))
		}
		return nil
	}, nil
}

// parseOp answers the op name measures and what runs, unmeasured, before
// each: click-after-shot is a click after a viewport capture, as the
// actions API's trace takes after each click (a capture makes Chromium's
// next press and release slower).
func parseOp(name string) (prep, f op, err error) {
	switch {
	case name == "evaluate":
		return nil, evaluate("1"), nil
	case name == "click":
		return nil, click, nil
	case name == "click-after-shot":
		prep, err := shot("png+fast")
		return prep, click, err
	case strings.HasPrefix(name, "shot:"):
		f, err := shot(strings.TrimPrefix(name, "shot:"))
		return nil, f, err
	}
	return nil, nil, fmt.Errorf("unknown op %q (evaluate, click, click-after-shot, shot:png[+fast], shot:jpeg-80, shot:webp-80)", name)
}

// pageURL is the WebSocket URL of the browser's first page.
func pageURL(ctx context.Context, addr string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/json/list", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	var list []struct {
		Type string `json:"type"`
		WS   string `json:"webSocketDebuggerUrl"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return "", fmt.Errorf("/json/list: %v: %s", err, b)
	}
	for _, t := range list {
		if t.Type == "page" {
			return t.WS, nil
		}
	}
	return "", errors.New("the browser has no page")
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:9222", "Chromium's DevTools address")
	n := flag.Int("n", 50, "measured iterations of each op")
	warm := flag.Int("warm", 5, "unmeasured iterations first")
	ops := flag.String("ops", "evaluate,click,shot:png+fast", "ops, run interleaved")
	wait := flag.Duration("wait", 30*time.Second, "how long to wait for the browser")
	setup := flag.Bool("setup", true, "set up the benchmark's page first (false: measure the page as it is)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	names := strings.Split(*ops, ",")
	var preps, fs []op
	for _, name := range names {
		prep, f, err := parseOp(name)
		if err != nil {
			return err
		}
		preps, fs = append(preps, prep), append(fs, f)
	}
	var u string
	deadline := time.Now().Add(*wait)
	for {
		var err error
		if u, err = pageURL(ctx, *addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the browser at %s: %v", *addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	wc, _, err := websocket.Dial(ctx, u, nil)
	if err != nil {
		return err
	}
	defer wc.CloseNow()
	wc.SetReadLimit(256 << 20)
	c := &conn{c: wc}
	if *setup {
		if err := evaluate(page)(ctx, c); err != nil {
			return err
		}
	}
	out := map[string][]int64{}
	for i := range *warm + *n {
		for j, f := range fs {
			if preps[j] != nil {
				if err := preps[j](ctx, c); err != nil {
					return fmt.Errorf("%s: %w", names[j], err)
				}
			}
			t0 := time.Now()
			if err := f(ctx, c); err != nil {
				return fmt.Errorf("%s: %w", names[j], err)
			}
			if i >= *warm {
				out[names[j]] = append(out[names[j]], time.Since(t0).Microseconds())
			}
		}
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cdpdirect:", err)
		os.Exit(1)
	}
}
