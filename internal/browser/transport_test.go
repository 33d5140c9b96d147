package browser

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/runtime"
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
	// Every click read its answer's URL and title with its press and
	// release, no read of its own after it (the evaluate before took one).
	if got := liveSession(t, m, "sbx_1").infoReads; got != 1 {
		t.Fatalf("%d answers took a read of their own after %d clicks, want 1 (the evaluate's)", got, clicks)
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

// liveSession is m's actions session of sandbox id.
func liveSession(t *testing.T, m *Manager, id string) *session {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[id]
	if s == nil {
		t.Fatalf("no session of %s", id)
	}
	return s
}

// TestClickAnswerAfterHandlers: the answer of a click by selector is the
// page as the click's handlers left it also when the page's window sees
// no pointerup (a listener of the page's stops it first, or the element
// is covered by a frame, whose document gets the events): the read that
// goes with the press and release is let go once the release is handled.
// A click that navigates answers the page's URL, read as after any action.
func TestClickAnswerAfterHandlers(t *testing.T) {
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
		if !res.OK {
			t.Fatalf("%s: %+v", a.Type, res)
		}
		return res
	}
	// The window's own capturing listeners, added first, stop the
	// release; the button's mousedown sets the title, as does a frame's
	// click over the second button.
	run(api.BrowserAction{Type: "evaluate", Expression: `let n = 0;
for (const k of ['pointerup', 'mouseup']) addEventListener(k, e => e.stopImmediatePropagation(), true);
document.body.innerHTML = '<button id="b" style="position:absolute;left:0;top:0;width:200px;height:80px">0</button>' +
  '<div id="c" style="position:absolute;left:0;top:100px;width:200px;height:80px">under</div>' +
  '<iframe id="f" style="position:absolute;left:0;top:100px;width:200px;height:80px;border:0"></iframe>';
document.getElementById('b').addEventListener('mousedown', () => { n++; document.title = 'pressed ' + n; });
const f = document.getElementById('f');
f.contentDocument.body.style.margin = '0';
f.contentDocument.body.innerHTML = '<div style="width:200px;height:80px">frame</div>';
f.contentDocument.addEventListener('click', () => { n++; document.title = 'frame ' + n; }); 1`})
	for i := 1; i <= 6; i += 2 {
		if res := run(api.BrowserAction{Type: "click", Selector: "#b"}); res.Title != "pressed "+strconv.Itoa(i) {
			t.Fatalf("click %d on the button answered title %q, want %q", i, res.Title, "pressed "+strconv.Itoa(i))
		}
		a := api.BrowserAction{Type: "click", Selector: "#c"}
		if i == 3 { // at a point
			x, y := 100.0, 140.0
			a = api.BrowserAction{Type: "click", X: &x, Y: &y}
		}
		if res := run(a); res.Title != "frame "+strconv.Itoa(i+1) {
			t.Fatalf("click %d over the frame answered title %q, want %q", i+1, res.Title, "frame "+strconv.Itoa(i+1))
		}
	}
	// None of them took a read of its own for the answer (the evaluate
	// before them did).
	if got := liveSession(t, m, "sbx_1").infoReads; got != 1 {
		t.Fatalf("%d answers took a read of their own, want 1 (the evaluate's): a click's read was not let go", got)
	}
	// A link to a page that changes its own title and URL in the click's
	// handler, with no new document: the answer has both.
	run(api.BrowserAction{Type: "evaluate", Expression: `document.body.innerHTML = '<a id="a" href="#next">next</a>';
document.getElementById('a').addEventListener('click', () => { document.title = 'moved'; }); 1`})
	res := run(api.BrowserAction{Type: "click", Selector: "#a"})
	if res.Title != "moved" || !strings.HasSuffix(res.URL, "#next") {
		t.Fatalf("a click on an in-page link answered %q %q, want the title moved and a URL ending #next", res.Title, res.URL)
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

// TestClickReadWaitsForTheRelease: the read that goes with a click's press
// and release (clickRead) answers only once the page dispatched a
// release, after the click's handlers, however early it reaches the page.
func TestClickReadWaitsForTheRelease(t *testing.T) {
	t.Parallel()
	tgt := hostBrowser(t)
	m := newManager(t, tgt, &memKeeper{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := m.Run(ctx, "t1", "sbx_1", &api.BrowserActionsRequest{Actions: []api.BrowserAction{{Type: "evaluate", Expression: `
document.body.innerHTML = '<button id="b" style="position:absolute;left:0;top:0;width:200px;height:80px">0</button>';
document.getElementById('b').addEventListener('click', () => { document.title = 'clicked'; }); 1`}}})
	if err != nil || !res.OK {
		t.Fatalf("setup: %+v %v", res, err)
	}
	s := liveSession(t, m, "sbx_1")
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ccancel := context.WithTimeout(s.tabs[s.active].ctx, 30*time.Second)
	defer ccancel()
	yes := true
	if err := s.send(c, command{Method: runtime.CommandEvaluate, Params: runtime.EvaluateParams{Expression: clickArm}}); err != nil {
		t.Fatal(err)
	}
	var info runtime.EvaluateResult
	b, err := s.start(c, command{Method: runtime.CommandEvaluate, Params: runtime.EvaluateParams{Expression: clickRead, ReturnByValue: &yes, AwaitPromise: &yes}, Result: &info})
	if err != nil {
		t.Fatal(err)
	}
	defer b.done()
	select {
	case <-b.chans[0]:
		t.Fatal("the read answered before any release")
	case <-time.After(300 * time.Millisecond):
	}
	p := input.DispatchMouseEventParams{Type: input.DispatchMouseEventTypeMousePressed, X: 100, Y: 40, Button: input.MouseButtonLeft, ClickCount: 1}
	r := p
	r.Type = input.DispatchMouseEventTypeMouseReleased
	if err := s.send(c, command{Method: input.CommandDispatchMouseEvent, Params: p}, command{Method: input.CommandDispatchMouseEvent, Params: r}); err != nil {
		t.Fatal(err)
	}
	if err := b.wait(c, 0); err != nil {
		t.Fatal(err)
	}
	var pi pageInfo
	if info.Result == nil || json.Unmarshal(info.Result.Value, &pi) != nil || pi.Title != "clicked" {
		t.Fatalf("the read answered %+v, want the title the click's handler set", info.Result)
	}
}
