package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/config"
)

// actionKind is what the package knows of one browser action type. The
// table actions is the vocabulary's one list: a new action is one entry
// (its check, its handler, how the trace treats it), and the replay and
// the API learn of it from there.
type actionKind struct {
	// check, if set, validates the action's own fields (the common ones,
	// type and timeout_ms, are checked for all); it returns the problem in
	// words, "" when there is none.
	check func(a api.BrowserAction, spec config.BrowserSpec) string
	// tab, if set, runs the action on the session (the tabs); otherwise
	// page runs it on the active tab's context c, within its timeout.
	tab  func(s *session, ctx context.Context, a api.BrowserAction, timeout time.Duration, r *ActionResult) error
	page func(s *session, c context.Context, a api.BrowserAction) (any, error)
	// changes marks the actions that change or move about the page: they
	// get trace screenshots (before and after, as the mode asks).
	changes bool
	// types marks the actions whose text goes into a field: recorded as a
	// count when the field is a password field.
	types bool
	// image marks the action whose page answer is an encoded image, kept
	// as an artifact or answered inline (screenshot).
	image bool
	// reads marks the actions that only read the page (or the tab list):
	// they run while the trace's "after" screenshot of the action before
	// is still being captured, where any other action waits for it.
	reads bool
	// loads marks the action that loads a URL: its answer (status, URL)
	// goes into the trace, and its failure in a sandbox without a network
	// is explained as such.
	loads bool
	// timeout, if set, is the action's time given the one it would have
	// (a wait of ms gets at least ms and a second).
	timeout func(a api.BrowserAction, base time.Duration) time.Duration
}

// readsOnly reports whether action a only reads the page: a kind that
// reads, but not a full-page screenshot (Chromium resizes the view while
// it captures one).
func (k actionKind) readsOnly(a api.BrowserAction) bool { return k.reads && !a.FullPage }

// steps are the chromedp actions of a page action that answers nothing.
type steps = []chromedp.Action[chromedp.Void]

// actions is the browser's action vocabulary.
var actions = actionTable()

// actionTable returns the vocabulary (see actionKind).
func actionTable() map[string]actionKind {
	needSel := func(a api.BrowserAction, _ config.BrowserSpec) string {
		if a.Selector == "" {
			return a.Type + " needs a selector"
		}
		return ""
	}
	selOrPoint := func(a api.BrowserAction, _ config.BrowserSpec) string {
		if a.Selector == "" && (a.X == nil || a.Y == nil) {
			return a.Type + " needs a selector or x and y"
		}
		return ""
	}
	needTab := func(a api.BrowserAction, _ config.BrowserSpec) string {
		if a.Tab == "" {
			return a.Type + " needs a tab"
		}
		return ""
	}
	do := func(f func(a api.BrowserAction) steps) func(*session, context.Context, api.BrowserAction) (any, error) {
		return func(_ *session, c context.Context, a api.BrowserAction) (any, error) {
			return nil, chromedp.Do(c, f(a)...)
		}
	}
	return map[string]actionKind{
		"navigate": {changes: true, loads: true, page: navigate, check: func(a api.BrowserAction, _ config.BrowserSpec) string {
			u, err := url.Parse(a.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https" && a.URL != "about:blank") {
				return fmt.Sprintf("url %q must be an http or https URL", a.URL)
			}
			return ""
		}},
		"back":    {changes: true, page: do(func(api.BrowserAction) steps { return steps{chromedp.NavigateBack()} })},
		"forward": {changes: true, page: do(func(api.BrowserAction) steps { return steps{chromedp.NavigateForward()} })},
		"reload":  {changes: true, page: do(func(api.BrowserAction) steps { return steps{chromedp.Reload()} })},
		"click":   {changes: true, check: selOrPoint, page: click},
		"hover":   {changes: true, check: selOrPoint, page: hover},
		"fill": {changes: true, types: true, check: needSel, page: do(func(a api.BrowserAction) steps {
			sel := chromedp.CSS(a.Selector)
			return steps{chromedp.Clear(sel), chromedp.SendKeys(sel, a.Text)}
		})},
		"type": {changes: true, types: true, check: needSel, page: do(func(a api.BrowserAction) steps {
			return steps{chromedp.SendKeys(chromedp.CSS(a.Selector), a.Text)}
		})},
		"press": {changes: true, page: press, check: func(a api.BrowserAction, _ config.BrowserSpec) string {
			if _, ok := keyNames[a.Key]; !ok && len([]rune(a.Key)) != 1 {
				return fmt.Sprintf("key %q is not a key name (Enter, Tab, Escape, ...) or one character", a.Key)
			}
			return ""
		}},
		"scroll": {changes: true, page: scroll},
		"wait": {reads: true, page: wait, timeout: func(a api.BrowserAction, base time.Duration) time.Duration {
			if a.Selector != "" {
				return base
			}
			return max(base, time.Duration(a.Ms)*time.Millisecond+time.Second)
		}, check: func(a api.BrowserAction, spec config.BrowserSpec) string {
			if time.Duration(a.Ms)*time.Millisecond > spec.MaxActionTimeout {
				return fmt.Sprintf("ms %d is over the %d ms an action may take", a.Ms, spec.MaxActionTimeout.Milliseconds())
			}
			if a.Selector == "" && a.Ms <= 0 {
				return "wait needs a selector or ms"
			}
			return ""
		}},
		"evaluate": {page: evaluate, check: func(a api.BrowserAction, _ config.BrowserSpec) string {
			if a.Expression == "" {
				return "evaluate needs an expression"
			}
			return ""
		}},
		"text": {reads: true, page: text},
		"upload": {changes: true, page: do(func(a api.BrowserAction) steps {
			return steps{chromedp.SetUploadFiles(chromedp.CSS(a.Selector), a.Files)}
		}), check: func(a api.BrowserAction, spec config.BrowserSpec) string {
			if p := needSel(a, spec); p != "" {
				return p
			}
			if len(a.Files) == 0 {
				return "upload needs files"
			}
			return ""
		}},
		"select":       {changes: true, check: needSel, page: selectOption},
		"snapshot":     {reads: true, page: func(_ *session, c context.Context, _ api.BrowserAction) (any, error) { return snapshot(c) }},
		"screenshot":   {reads: true, image: true, page: screenshot, check: checkScreenshot},
		"tab_new":      {tab: tabNew, check: checkTabURL},
		"tabs":         {reads: true, tab: tabs},
		"tab_switch":   {tab: tabSwitch, check: needTab},
		"tab_activate": {tab: tabSwitch, check: needTab},
		"tab_close":    {tab: tabClose},
	}
}

func checkTabURL(a api.BrowserAction, _ config.BrowserSpec) string {
	if a.URL != "" {
		if u, err := url.Parse(a.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			return fmt.Sprintf("url %q must be an http or https URL", a.URL)
		}
	}
	return ""
}

func checkScreenshot(a api.BrowserAction, _ config.BrowserSpec) string {
	switch {
	case a.Format != "" && a.Format != "png" && a.Format != "jpeg":
		return fmt.Sprintf("format %q is not png or jpeg", a.Format)
	case a.Scale != 0 && (a.Scale < 0.1 || a.Scale > 2):
		return fmt.Sprintf("scale %g is not between 0.1 and 2", a.Scale)
	case a.Quality < 0 || a.Quality > 100:
		return fmt.Sprintf("quality %d is not 0-100", a.Quality)
	case a.Name != "" && (strings.ContainsAny(a.Name, "/\\\x00") || len(a.Name) > 255):
		return fmt.Sprintf("name %q must be a plain file name", a.Name)
	}
	return ""
}

func navigate(_ *session, c context.Context, a api.BrowserAction) (any, error) {
	if a.URL == "about:blank" {
		return nil, chromedp.Do(c, chromedp.Navigate(a.URL))
	}
	resp, err := chromedp.Run(c, chromedp.NavigateResponse(a.URL))
	if err != nil {
		return nil, err
	}
	if resp == nil {
		return nil, nil
	}
	// The egress gateway answers a refused plain-HTTP request itself:
	// that is the policy speaking, not the site.
	for k, v := range resp.Headers {
		if strings.EqualFold(k, "X-Genesis-Egress-Reason") {
			host := a.URL
			if u, err := url.Parse(a.URL); err == nil {
				host = u.Host
			}
			return nil, fmt.Errorf("the sandbox's network policy refused %s (%v): see GET /v1/sandboxes/{id}/network/events", host, v)
		}
	}
	return navResult{Status: resp.Status, URL: resp.URL}, nil
}

func click(s *session, c context.Context, a api.BrowserAction) (any, error) {
	ch := s.listenClicks(c)
	if a.Selector == "" {
		// The page's listener is set up in each new document once the
		// session has the tab's world, and made here in the document
		// open then (clickanswer.go); if that fails, the answer is read
		// after the release.
		if ch != nil {
			if id, made, err := s.tabWorld(c, false); err != nil {
				ch = nil
			} else if made {
				if _, err := evalIn[bool](s, c, id, listenScript+"; true", false); err != nil {
					ch = nil
				}
			}
		}
		return nil, s.clickAt(c, ch, point{*a.X, *a.Y})
	}
	// One evaluate finds the element, waits until it is visible,
	// scrolls it to the middle and answers its centre (and sets up the
	// page's listener for the click's answer, clickanswer.go); then the
	// press and release. (chromedp's Click takes five or more round trips
	// to the page for the same, each a dear one under runsc.)
	t0 := time.Now()
	var pt point
	var err error
	if ch != nil {
		pt, err = inWorld(s, c, func(id runtime.ExecutionContextID) (point, error) {
			return callIn[point](s, c, id, findInWorld, a.Selector, remaining(c))
		})
	}
	if ch == nil || errors.Is(err, errNoWorld) {
		// Without the world the answer is read after the release.
		ch = nil
		pt, err = evalPage[point](s, c, clickTarget(a.Selector, remaining(c)), true)
	}
	s.lap(func(t *ActionTimings) *time.Duration { return &t.Find }, t0)
	if err != nil {
		return nil, err
	}
	s.point = &pt
	t0 = time.Now()
	defer s.lap(func(t *ActionTimings) *time.Duration { return &t.Input }, t0)
	return nil, s.clickAt(c, ch, pt)
}

// mouseClick presses and releases the left button at x, y: both
// commands are sent at once (as Puppeteer's click sends its move, down
// and up) and Chromium's input handler dispatches them to the page in the
// order it receives them, so the click costs one round trip through the
// sandbox's agent instead of two (TestClickOneRoundTrip checks the page
// sees mousedown, mouseup and click, in that order).
func (s *session) mouseClick(c context.Context, x, y float64) error {
	p := input.DispatchMouseEventParams{Type: input.DispatchMouseEventTypeMousePressed, X: x, Y: y, Button: input.MouseButtonLeft, ClickCount: 1}
	r := p
	r.Type = input.DispatchMouseEventTypeMouseReleased
	return s.send(c, command{Method: input.CommandDispatchMouseEvent, Params: p}, command{Method: input.CommandDispatchMouseEvent, Params: r})
}

func hover(_ *session, c context.Context, a api.BrowserAction) (any, error) {
	if a.Selector == "" {
		return nil, chromedp.Do(c, chromedp.MouseEvent(chromedp.MouseMoved, *a.X, *a.Y))
	}
	return nil, chromedp.Do(c, chromedp.ScrollIntoView(chromedp.CSS(a.Selector)), chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Evaluate[bool](fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (!e) return false;
				const r = e.getBoundingClientRect(); e.dispatchEvent(new MouseEvent('mouseover', {bubbles: true, clientX: r.x + r.width/2, clientY: r.y + r.height/2})); return true })()`, jsString(a.Selector)))(ctx, t)
		return err
	}))
}

func press(_ *session, c context.Context, a api.BrowserAction) (any, error) {
	k := keyNames[a.Key]
	if k == "" {
		k = a.Key
	}
	if a.Selector != "" {
		return nil, chromedp.Do(c, chromedp.SendKeys(chromedp.CSS(a.Selector), k))
	}
	return nil, chromedp.Do(c, chromedp.KeyEvent(k))
}

func scroll(_ *session, c context.Context, a api.BrowserAction) (any, error) {
	if a.Selector != "" {
		return nil, chromedp.Do(c, chromedp.ScrollIntoView(chromedp.CSS(a.Selector)))
	}
	_, err := chromedp.Run(c, chromedp.Evaluate[bool](fmt.Sprintf(`(window.scrollBy(%g, %g), true)`, a.DeltaX, a.DeltaY)))
	return nil, err
}

func wait(_ *session, c context.Context, a api.BrowserAction) (any, error) {
	if a.Selector != "" {
		return nil, chromedp.Do(c, chromedp.WaitVisible(chromedp.CSS(a.Selector)))
	}
	return nil, chromedp.Do(c, chromedp.Sleep(time.Duration(a.Ms)*time.Millisecond))
}

func evaluate(_ *session, c context.Context, a api.BrowserAction) (any, error) {
	v, err := chromedp.Run(c, chromedp.Evaluate[json.RawMessage](a.Expression, chromedp.EvalAwaitPromise))
	if errors.Is(err, chromedp.ErrJSNull) || errors.Is(err, chromedp.ErrJSUndefined) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return v, nil
}

func text(_ *session, c context.Context, a api.BrowserAction) (any, error) {
	if a.Selector == "" {
		return chromedp.Run(c, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	}
	return chromedp.Run(c, chromedp.Text(chromedp.CSS(a.Selector)))
}

func selectOption(_ *session, c context.Context, a api.BrowserAction) (any, error) {
	if err := chromedp.Do(c, chromedp.WaitReady(chromedp.CSS(a.Selector))); err != nil {
		return nil, err
	}
	return chromedp.Run(c, chromedp.Evaluate[string](fmt.Sprintf(`(() => {
  const e = document.querySelector(%s), v = %s;
  if (!e || e.tagName !== 'SELECT') throw new Error('the selector matches no <select>');
  if (![...e.options].some(o => o.value === v)) throw new Error('the <select> has no option ' + JSON.stringify(v));
  e.value = v;
  e.dispatchEvent(new Event('input', {bubbles: true}));
  e.dispatchEvent(new Event('change', {bubbles: true}));
  return e.value;
})()`, jsString(a.Selector), jsString(a.Value))))
}

func screenshot(_ *session, c context.Context, a api.BrowserAction) (any, error) {
	p := page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatPng}
	if !a.Compress {
		// Fast encoding (larger files) saves about a tenth of a
		// viewport screenshot's time (make bench).
		fast := true
		p.OptimizeForSpeed = &fast
	}
	if a.Format == "jpeg" {
		p.Format = page.CaptureScreenshotFormatJpeg
		q := int64(80)
		if a.Quality > 0 {
			q = int64(a.Quality)
		}
		p.Quality = &q
	}
	if a.FullPage {
		yes := true
		p.CaptureBeyondViewport = &yes
	}
	if a.Scale != 0 && a.Scale != 1 {
		m, err := chromedp.Call(c, page.GetLayoutMetrics, cdp.Empty{})
		if err != nil {
			return nil, err
		}
		clip := &page.Viewport{Scale: a.Scale}
		if vv := m.CSSVisualViewport; vv != nil {
			clip.X, clip.Y, clip.Width, clip.Height = vv.PageX, vv.PageY, vv.ClientWidth, vv.ClientHeight
		}
		if cs := m.CSSContentSize; a.FullPage && cs != nil {
			clip.X, clip.Y, clip.Width, clip.Height = 0, 0, cs.Width, cs.Height
		}
		p.Clip = clip
	}
	res, err := chromedp.Call(c, page.CaptureScreenshot, p)
	if err != nil {
		return nil, err
	}
	return res.Data, nil
}

func tabNew(s *session, ctx context.Context, a api.BrowserAction, _ time.Duration, r *ActionResult) error {
	id, err := s.newTab(ctx, a.URL)
	r.Value = string(id)
	return err
}

func tabs(s *session, ctx context.Context, _ api.BrowserAction, _ time.Duration, r *ActionResult) error {
	tabs, err := s.listTabs(ctx)
	r.Value = tabs
	return err
}

func tabSwitch(s *session, ctx context.Context, a api.BrowserAction, _ time.Duration, _ *ActionResult) error {
	id := target.ID(a.Tab)
	if _, ok := s.tabs[id]; !ok {
		tabs, err := s.listTabs(ctx)
		if err != nil {
			return err
		}
		found := false
		for _, tb := range tabs {
			found = found || tb.ID == a.Tab
		}
		if !found {
			return fmt.Errorf("no tab %q (list them with a tabs action)", a.Tab)
		}
		if err := s.adopt(ctx, id); err != nil {
			return err
		}
	}
	s.setActive(id)
	_, err := withDeadline(ctx, s.bctx, func(c context.Context) (struct{}, error) {
		_, err := chromedp.CallBrowser(c, target.ActivateTarget, target.ActivateTargetParams{TargetID: id})
		return struct{}{}, err
	})
	return err
}

func tabClose(s *session, ctx context.Context, a api.BrowserAction, timeout time.Duration, _ *ActionResult) error {
	id := s.active
	if a.Tab != "" {
		id = target.ID(a.Tab)
	}
	_, err := withDeadline(ctx, s.bctx, func(c context.Context) (struct{}, error) {
		_, err := chromedp.CallBrowser(c, target.CloseTarget, target.CloseTargetParams{TargetID: id})
		return struct{}{}, err
	})
	if err == nil {
		// Chromium answers before the page is gone: a tabs action
		// right after would still list it.
		err = s.waitGone(ctx, id, timeout)
	}
	if tc, ok := s.tabs[id]; ok {
		tc.cancel()
		delete(s.tabs, id)
		delete(s.worlds, id)
	}
	if err == nil && id == s.active {
		s.setActive("")
		for other := range s.tabs {
			s.setActive(other)
			break
		}
	}
	return err
}
