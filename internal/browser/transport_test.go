package browser

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"genesis.dev/sandbox/api"
)

// TestClickOneRoundTrip: a click sends its press and release at once
// (session.send), and the page still sees mousedown, mouseup and click in
// that order, each click once; the answer's title is the one the click
// handler set, read after the release was handled; a click at a point
// works alike, and a malformed selector fails with the page's exception.
func TestClickOneRoundTrip(t *testing.T) {
	t.Parallel()
	tgt := hostBrowser(t)
	m := newManager(t, tgt, &memKeeper{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := func(a api.BrowserAction) *ActionsResult {
		t.Helper()
		res, err := m.Run(ctx, "t1", "sbx_1", &api.BrowserActionsRequest{Actions: []api.BrowserAction{a}})
		if err != nil {
			t.Fatalf("%s: %v", a.Type, err)
		}
		return res
	}
	run(api.BrowserAction{Type: "evaluate", Expression: `window.log = []; let n = 0;
document.body.innerHTML = '<button id="b" style="position:absolute;left:0;top:0;width:200px;height:80px">0</button>';
const b = document.getElementById('b');
for (const k of ['mousedown', 'mouseup', 'click']) b.addEventListener(k, () => log.push(k));
b.addEventListener('click', () => { n++; b.textContent = n; document.title = 'clicked ' + n; }); 1`})
	const clicks = 20
	for i := 1; i <= clicks; i++ {
		a := api.BrowserAction{Type: "click", Selector: "#b"}
		if i%2 == 0 {
			x, y := 100.0, 40.0
			a = api.BrowserAction{Type: "click", X: &x, Y: &y}
		}
		res := run(a)
		if !res.OK {
			t.Fatalf("click %d: %+v", i, res)
		}
		if want := "clicked " + strconv.Itoa(i); res.Title != want {
			t.Fatalf("click %d answered title %q, want %q (read before the click was handled)", i, res.Title, want)
		}
	}
	res := run(api.BrowserAction{Type: "evaluate", Expression: `log.join(' ')`})
	want := strings.TrimSpace(strings.Repeat("mousedown mouseup click ", clicks))
	if got, _ := res.Results[0].Value.(json.RawMessage); !res.OK || strings.Trim(string(got), `"`) != want {
		t.Fatalf("the page saw %s, want %q", res.Results[0].Value, want)
	}
	// A malformed selector throws in the page at once: the action fails
	// with the page's exception, as chromedp.Evaluate reported it.
	res = run(api.BrowserAction{Type: "click", Selector: "#["})
	if res.OK || !strings.Contains(res.Results[0].Error, "exception") || !strings.Contains(res.Results[0].Error, "not a valid selector") {
		t.Fatalf("a click of a malformed selector: %+v", res)
	}
}

// TestSendEndsWhenTheTabCloses: the session's own command to a tab that
// closes gets no reply from Chromium; the wait ends with
// chromedp.ErrTargetDetached when the browser detaches the tab, not at the
// command's deadline.
func TestSendEndsWhenTheTabCloses(t *testing.T) {
	t.Parallel()
	tgt := hostBrowser(t)
	m := newManager(t, tgt, &memKeeper{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := m.Run(ctx, "t1", "sbx_1", &api.BrowserActionsRequest{Actions: []api.BrowserAction{{Type: "tab_new"}}})
	if err != nil || !res.OK {
		t.Fatalf("tab_new: %+v %v", res, err)
	}
	m.mu.Lock()
	s := m.sessions[tgt.SandboxID]
	m.mu.Unlock()
	tc := s.tabs[s.active]
	done := make(chan error, 1)
	go func() {
		c, cancel := context.WithTimeout(tc.ctx, 30*time.Second)
		defer cancel()
		_, err := evalPage[int](s, c, `window.started = true; new Promise(() => {})`, true)
		done <- err
	}()
	// The page runs one script at a time: once it says started, the
	// evaluate that never answers is under way.
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, cancel := context.WithTimeout(tc.ctx, 5*time.Second)
		started, err := evalPage[bool](s, c, `window.started === true`, false)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if started {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the evaluate did not start within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t0 := time.Now()
	if _, err := chromedp.CallBrowser(s.bctx, target.CloseTarget, target.CloseTargetParams{TargetID: s.active}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, chromedp.ErrTargetDetached) {
			t.Fatalf("the wait for a closed tab's reply ended with %v, want ErrTargetDetached", err)
		}
		t.Logf("ended %v after the close", time.Since(t0))
	case <-time.After(10 * time.Second):
		t.Fatal("the wait for a closed tab's reply did not end within 10 s of the close")
	}
}

// TestActionTimings: a request that asks (WithActionTimings) learns where
// a click's time went: each part is filled in and they fit in the whole.
func TestActionTimings(t *testing.T) {
	t.Parallel()
	tgt := hostBrowser(t)
	m := newManager(t, tgt, &memKeeper{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if res, err := m.Run(ctx, "t1", "sbx_1", &api.BrowserActionsRequest{Actions: []api.BrowserAction{{Type: "evaluate",
		Expression: `document.body.innerHTML = '<button id="b" style="width:200px;height:80px">0</button>'; 1`}}}); err != nil || !res.OK {
		t.Fatalf("setup: %+v %v", res, err)
	}
	tm := &ActionTimings{}
	t0 := time.Now()
	res, err := m.Run(WithActionTimings(ctx, tm), "t1", "sbx_1", &api.BrowserActionsRequest{Actions: []api.BrowserAction{{Type: "click", Selector: "#b"}}})
	whole := time.Since(t0)
	if err != nil || !res.OK {
		t.Fatalf("click: %+v %v", res, err)
	}
	for name, d := range map[string]time.Duration{"attach": tm.Attach, "trace": tm.Trace, "actions": tm.Actions, "find": tm.Find, "input": tm.Input, "info": tm.Info} {
		if d <= 0 {
			t.Errorf("%s took %v: not timed (%+v)", name, d, tm)
		}
	}
	if tm.Find+tm.Input > tm.Actions || tm.Attach+tm.Trace+tm.Actions+tm.Info > whole {
		t.Errorf("the parts %+v do not fit in the actions or the whole %v", tm, whole)
	}
}
