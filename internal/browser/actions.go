package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromedp/cdproto/accessibility"
	cdpbrowser "github.com/chromedp/cdproto/browser"
	jsonv2 "github.com/chromedp/cdproto/cdp/jsonv2"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// ActionResult is what one action did; Artifact is a kept screenshot.
type ActionResult struct {
	Index    int
	Type     string
	OK       bool
	Ms       int64
	Error    string
	Value    any
	Artifact *sandbox.Artifact
}

// ActionsResult is the answer of POST .../browser/actions. Actions run in
// order and stop at the first that fails: OK is false and the failed
// action's result says why; the actions after it did not run.
type ActionsResult struct {
	OK      bool
	Results []ActionResult
	// URL, Title and Tab are the active tab's after the last action run.
	URL, Title, Tab string
}

var keyNames = map[string]string{
	"Enter": kb.Enter, "Tab": kb.Tab, "Escape": kb.Escape, "Backspace": kb.Backspace, "Delete": kb.Delete,
	"ArrowUp": kb.ArrowUp, "ArrowDown": kb.ArrowDown, "ArrowLeft": kb.ArrowLeft, "ArrowRight": kb.ArrowRight,
	"Home": kb.Home, "End": kb.End, "PageUp": kb.PageUp, "PageDown": kb.PageDown, "Space": " ",
}

// validate checks every action before any runs.
func validate(req *api.BrowserActionsRequest, t *Target) error {
	bad := func(i int, format string, args ...any) error {
		return errdefs.WithCode("invalid_action", fmt.Errorf("actions[%d]: "+format+": %w", append([]any{i}, append(args, errdefs.ErrInvalidArgument)...)...))
	}
	if len(req.Actions) == 0 {
		return errdefs.WithCode("invalid_action", errdefs.Invalid("actions: give at least one action"))
	}
	if len(req.Actions) > t.Spec.MaxActions {
		return errdefs.WithCode("too_many_actions", errdefs.Invalid("actions: %d actions, at most %d in one request", len(req.Actions), t.Spec.MaxActions))
	}
	for i, a := range req.Actions {
		kind, ok := actions[a.Type]
		if !ok {
			return bad(i, "unknown type %q", a.Type)
		}
		if a.TimeoutMs < 0 || time.Duration(a.TimeoutMs)*time.Millisecond > t.Spec.MaxActionTimeout {
			return bad(i, "timeout_ms %d is not between 0 and %d", a.TimeoutMs, t.Spec.MaxActionTimeout.Milliseconds())
		}
		if kind.check == nil {
			continue
		}
		if p := kind.check(a, t.Spec); p != "" {
			return bad(i, "%s", p)
		}
	}
	return nil
}

// session is the actions API's connection to one sandbox's browser. One
// request runs at a time.
type session struct {
	mu      sync.Mutex
	t       *Target
	alloc   *allocator
	acancel context.CancelFunc
	bctx    context.Context // browser-level chromedp context
	bcancel context.CancelFunc
	tabs    map[target.ID]tabCtx
	active  target.ID
	shots   int
	// lastURL is the page last recorded in the trace (navigation events
	// are recorded when it changes).
	lastURL string
	// point is where the current action pressed or hovered, in the
	// viewport's CSS pixels (the trace marks it on the screenshot).
	point *point
	// watched is the active tab for a recording's screencast, which reads
	// it without the session's lock (setActive keeps it).
	watched atomic.Pointer[tabCtx]
	// pendingShot, if set, closes once the trace's "after" screenshot that
	// a request left behind is captured (waitShot).
	pendingShot chan struct{}
	// timings, when the request asked for them (WithActionTimings), is
	// where the request's time goes.
	timings *ActionTimings
	// worlds are the tabs' isolated worlds for the clicks' evaluates;
	// answer, if set, is the URL and title the page pushed after the
	// current action, a click, and pending the push that action still
	// awaits (clickanswer.go); pushedAnswers counts the answers pushed.
	worlds        map[target.ID]*world
	answer        *pageInfo
	pending       *pendingAnswer
	pushedAnswers int
}

// ActionTimings is where an actions request's time goes inside the
// service, for a caller that asks (WithActionTimings; the Server-Timing
// knob): Attach is the sandbox's lookup, the request's checks, the
// admission and the session; Trace the trace's records of the actions
// (and the redaction check); Actions the actions themselves, of which
// Find is a click's evaluate that finds its element and Input its press
// and release (until the page pushed the click's answer, or Chromium
// answered both); Info the answer's read of the URL and title after the
// actions (none when the click's page pushed it in time).
type ActionTimings struct {
	Attach, Trace, Actions, Find, Input, Info time.Duration
}

type timingsKey struct{}

// WithActionTimings returns ctx asking Run to fill in t.
func WithActionTimings(ctx context.Context, t *ActionTimings) context.Context {
	return context.WithValue(ctx, timingsKey{}, t)
}

// lap adds the time since t0 to the request's timing field, if it asked.
func (s *session) lap(field func(*ActionTimings) *time.Duration, t0 time.Time) {
	if s.timings != nil {
		*field(s.timings) += time.Since(t0)
	}
}

// setActive makes id the active tab.
func (s *session) setActive(id target.ID) {
	s.active = id
	if tc, ok := s.tabs[id]; ok {
		s.watched.Store(&tc)
	} else {
		s.watched.Store(nil)
	}
}

type tabCtx struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// open connects to the browser and adopts its first page.
// notice, if set, is called (in its own goroutine) when Chromium reports a
// download complete.
func openSession(ctx context.Context, t *Target, notice func()) (*session, error) {
	alloc := &allocator{t: t}
	actx, acancel := chromedp.NewAllocatorContext(context.Background(), alloc)
	bctx, bcancel := chromedp.NewContext(actx)
	s := &session{t: t, alloc: alloc, acancel: acancel, bctx: bctx, bcancel: bcancel, tabs: map[target.ID]tabCtx{}}
	fail := func(err error) (*session, error) {
		s.close()
		return nil, err
	}
	// The browser-level calls run under the request's deadline.
	infos, err := withDeadline(ctx, bctx, func(c context.Context) ([]*target.Info, error) { return chromedp.Targets(c) })
	if err != nil {
		return fail(fmt.Errorf("attaching to the browser of sandbox %s: %v: %w", t.SandboxID, err, errdefs.ErrBadGateway))
	}
	if _, err := withDeadline(ctx, bctx, func(c context.Context) (struct{}, error) {
		events := notice != nil
		_, err := chromedp.CallBrowser(c, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
			Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: t.Spec.DownloadsDir, EventsEnabled: &events,
		})
		return struct{}{}, err
	}); err != nil {
		return fail(fmt.Errorf("setting the download directory: %v: %w", err, errdefs.ErrBadGateway))
	}
	if notice != nil {
		if err := chromedp.ListenBrowser(bctx, func(ev any) {
			if p, ok := ev.(*cdpbrowser.EventDownloadProgress); ok && p.State == cdpbrowser.DownloadProgressStateCompleted {
				go notice()
			}
		}); err != nil {
			return fail(fmt.Errorf("following the downloads: %v: %w", err, errdefs.ErrBadGateway))
		}
	}
	for _, in := range infos {
		if in.Type == "page" {
			if err := s.adopt(ctx, in.TargetID); err != nil {
				return fail(err)
			}
			return s, nil
		}
	}
	if _, err := s.newTab(ctx, ""); err != nil {
		return fail(err)
	}
	return s, nil
}

// withDeadline runs f on the chromedp context c, cancelled when ctx ends
// (chromedp keys its state by c, so c itself must be passed down).
func withDeadline[T any](ctx, c context.Context, f func(context.Context) (T, error)) (T, error) {
	done := make(chan struct{})
	var v T
	var err error
	go func() { defer close(done); v, err = f(c) }()
	select {
	case <-done:
		return v, err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// adopt makes the page id a tab of the session, and the active one. The
// tab's chromedp context is attached here, under its own long-lived
// context: chromedp binds a target's event loop to the context of its
// first Run, so that Run must not carry an action's deadline. Ending the
// session detaches from the page and leaves it open.
func (s *session) adopt(ctx context.Context, id target.ID) error {
	c, cancel := chromedp.NewContext(s.bctx, chromedp.WithTargetID(id), chromedp.WithDetachOnCancel())
	if _, err := withDeadline(ctx, c, func(c context.Context) (chromedp.Void, error) {
		return chromedp.Run(c, chromedp.Func(func(context.Context, *chromedp.Target) error { return nil }))
	}); err != nil {
		cancel()
		return fmt.Errorf("attaching to tab %s: %w", id, err)
	}
	s.tabs[id] = tabCtx{c, cancel}
	delete(s.worlds, id) // a new DevTools session: its actions world is to be set up
	s.setActive(id)
	return nil
}

// newTab opens a page (url or about:blank) and makes it active.
func (s *session) newTab(ctx context.Context, u string) (target.ID, error) {
	if u == "" {
		u = "about:blank"
	}
	res, err := withDeadline(ctx, s.bctx, func(c context.Context) (target.CreateTargetResult, error) {
		return chromedp.CallBrowser(c, target.CreateTarget, target.CreateTargetParams{URL: u})
	})
	if err != nil {
		return "", fmt.Errorf("opening a tab: %w", err)
	}
	return res.TargetID, s.adopt(ctx, res.TargetID)
}

func (s *session) close() {
	for _, tc := range s.tabs {
		tc.cancel()
	}
	s.bcancel()
	s.acancel()
}

// send sends cmds to the page of the action's context c in one go
// (wsConn.send), within c's deadline.
func (s *session) send(c context.Context, cmds ...command) error {
	conn := s.alloc.conn.Load()
	if conn == nil {
		return fmt.Errorf("the session has no connection to the browser: %w", errdefs.ErrInternal)
	}
	return chromedp.Do(c, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		return conn.send(ctx, t.SessionID, cmds...)
	}))
}

// evalPage evaluates expression in the page of the action's context c,
// as chromedp.Evaluate does (by value; an exception is a
// *chromedp.ExceptionError; undefined and null are chromedp.ErrJSUndefined
// and chromedp.ErrJSNull), but as the session's own command: its answer
// goes straight to the caller, past chromedp's routing. T is a type that
// cannot be nil (a struct, a number, a string): chromedp answers null as
// the zero value for the others, this does not.
func evalPage[T any](s *session, c context.Context, expression string, await bool) (T, error) {
	return evalIn[T](s, c, 0, expression, await)
}

// evalIn is evalPage in the page's context id (0: its main world).
func evalIn[T any](s *session, c context.Context, id runtime.ExecutionContextID, expression string, await bool) (T, error) {
	yes := true
	p := runtime.EvaluateParams{Expression: expression, ReturnByValue: &yes, ContextID: id}
	if await {
		p.AwaitPromise = &yes
	}
	var r runtime.EvaluateResult
	if err := s.send(c, command{Method: runtime.CommandEvaluate, Params: p, Result: &r}); err != nil {
		var zero T
		return zero, err
	}
	return jsValue[T](r.Result, r.ExceptionDetails)
}

// callIn calls the function that declaration declares with args (each
// marshalled to JSON) in the page's context id, awaiting the promise it
// may answer, and answers as evalPage does. Its source is the same on
// every call, so V8 compiles it once (an evaluate whose source embeds
// its arguments is compiled anew each time).
func callIn[T any](s *session, c context.Context, id runtime.ExecutionContextID, declaration string, args ...any) (T, error) {
	var zero T
	yes := true
	p := runtime.CallFunctionOnParams{FunctionDeclaration: declaration, ExecutionContextID: id, ReturnByValue: &yes, AwaitPromise: &yes}
	for _, a := range args {
		b, err := json.Marshal(a)
		if err != nil {
			return zero, err
		}
		p.Arguments = append(p.Arguments, &runtime.CallArgument{Value: jsonv2.Value(b)})
	}
	var r runtime.CallFunctionOnResult
	if err := s.send(c, command{Method: runtime.CommandCallFunctionOn, Params: p, Result: &r}); err != nil {
		return zero, err
	}
	return jsValue[T](r.Result, r.ExceptionDetails)
}

// jsValue is the value of an evaluate's or a call's answer, as evalPage
// answers it.
func jsValue[T any](res *runtime.RemoteObject, exc *runtime.ExceptionDetails) (T, error) {
	var zero T
	if exc != nil {
		return zero, &chromedp.ExceptionError{ExceptionDetails: exc}
	}
	if res == nil || len(res.Value) == 0 || string(res.Value) == "null" {
		if res != nil && res.Type == "undefined" {
			return zero, chromedp.ErrJSUndefined
		}
		return zero, chromedp.ErrJSNull
	}
	var v T
	if err := json.Unmarshal(res.Value, &v); err != nil {
		return zero, err
	}
	return v, nil
}

// dead reports whether the session lost its browser.
func (s *session) dead() bool { return s.bctx.Err() != nil }

// Run runs the actions of req in the sandbox's browser.
func (m *Manager) Run(ctx context.Context, tenant, id string, req *api.BrowserActionsRequest) (*ActionsResult, error) {
	tm, _ := ctx.Value(timingsKey{}).(*ActionTimings)
	t0 := time.Now()
	t, err := m.attach(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer t.Release()
	if err := validate(req, t); err != nil {
		return nil, err
	}
	if m.cfg.Gate != nil {
		if err := m.cfg.Gate.Admit(ctx, tenant, t.SandboxID, "browser"); err != nil {
			return nil, err
		}
	}
	// A live session is a connection to the browser: it needs no readiness
	// dial (a round trip into the sandbox per request, a dear one under
	// runsc).
	if !m.liveSession(t.SandboxID) {
		if err := m.waitReady(ctx, t); err != nil {
			return nil, err
		}
	}
	s, err := m.session(ctx, t)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timings = tm
	defer func() { s.timings = nil }()
	lap := func(field func(*ActionTimings) *time.Duration) {
		if tm != nil {
			now := time.Now()
			*field(tm) += now.Sub(t0)
			t0 = now
		}
	}
	lap(func(t *ActionTimings) *time.Duration { return &t.Attach })
	out := &ActionsResult{OK: true, Results: make([]ActionResult, 0, len(req.Actions))}
	// The last action's "after" screenshot for the trace is taken after the
	// answer (so it shows what this request left); the next action that may
	// change the page waits until it is captured (pendingShot), one that
	// only reads the page does not.
	lastAfter := -1
	for i, a := range req.Actions {
		if !actions[a.Type].readsOnly(a) {
			if err := s.waitShot(ctx); err != nil {
				return nil, err
			}
		}
		start := time.Now()
		r := ActionResult{Index: i, Type: a.Type}
		timeout := t.Spec.ActionTimeout
		if a.TimeoutMs > 0 {
			timeout = time.Duration(a.TimeoutMs) * time.Millisecond
		}
		if f := actions[a.Type].timeout; f != nil {
			timeout = f(a, timeout)
		}
		t0 = time.Now()
		redact := m.cfg.Trace != nil && s.redacted(ctx, a)
		m.traceStarted(ctx, t, i, a, redact)
		lap(func(t *ActionTimings) *time.Duration { return &t.Trace })
		s.point, s.answer, s.pending = nil, nil, nil
		if a.X != nil && a.Y != nil {
			s.point = &point{*a.X, *a.Y}
		}
		shots := m.shotsFor(a)
		if shots.before {
			m.traceShot(ctx, t, s.shotOf(), i, a, "before")
		}
		err := s.do(ctx, tenant, a, timeout, &r, m.cfg.Artifacts)
		r.Ms = time.Since(start).Milliseconds()
		lap(func(t *ActionTimings) *time.Duration { return &t.Actions })
		if err != nil && ctx.Err() == nil && s.dead() {
			err = fmt.Errorf("the browser went away during the action: Chromium exited, or its sandbox ended (GET /v1/sandboxes/%s says which): %w", t.SandboxID, err)
		} else if err != nil && actions[a.Type].loads && t.Offline != nil && t.Offline(ctx) {
			err = offline(t.SandboxID, t.Profile, a.URL, err)
		}
		if err != nil {
			r.Error = actionError(err, timeout)
			out.OK = false
		} else {
			r.OK = true
		}
		out.Results = append(out.Results, r)
		m.traceFinished(ctx, t, r)
		lap(func(t *ActionTimings) *time.Duration { return &t.Trace })
		if shots.after && !s.dead() {
			if i == len(req.Actions)-1 {
				lastAfter = i
			} else {
				m.traceShot(ctx, t, s.shotOf(), i, a, "after")
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			break
		}
	}
	if tc, ok := s.tabs[s.active]; ok {
		out.Tab = string(s.active)
		if info, ok := s.readAnswer(ctx, tc); ok {
			out.URL, out.Title = info.URL, info.Title
		}
	}
	lap(func(t *ActionTimings) *time.Duration { return &t.Info })
	m.traceNavigation(ctx, t, s, out)
	lap(func(t *ActionTimings) *time.Duration { return &t.Trace })
	if lastAfter >= 0 {
		a, of, done := req.Actions[lastAfter], s.shotOf(), make(chan struct{})
		s.pendingShot = done
		go func() {
			defer close(done)
			m.traceShot(context.WithoutCancel(ctx), t, of, lastAfter, a, "after")
		}()
	}
	return out, nil
}

// waitShot waits until the trace's pending "after" screenshot (of the
// previous request's last action) is captured, so that an action that may
// change the page does not show in it. The capture has its own deadline.
func (s *session) waitShot(ctx context.Context) error {
	if s.pendingShot == nil {
		return nil
	}
	select {
	case <-s.pendingShot:
		s.pendingShot = nil
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// offline explains a failed navigation to rawURL in a sandbox (of
// profile) without a network: unless the URL is the sandbox's own
// loopback, the page could not load because nothing outside is reachable;
// a sandbox created with an allowlist can (mode none is for the sandbox's
// life).
func offline(sandboxID, profile, rawURL string, err error) error {
	u, perr := url.Parse(rawURL)
	if perr != nil || u.Hostname() == "" || u.Hostname() == "localhost" || net.ParseIP(u.Hostname()).IsLoopback() {
		return err
	}
	return fmt.Errorf("%w; sandbox %s has no network (mode none), so its browser loads only what is served inside it: "+
		"create a sandbox with an allowlist that names %s (genesis sandbox create --profile %s --allow %s)",
		err, sandboxID, u.Hostname(), profile, u.Hostname())
}

// navResult is a navigate action's value: the main document's response.
type navResult struct {
	Status int64  `json:"status"`
	URL    string `json:"url"`
}

type pageInfo struct {
	URL   string `json:"url"`
	Title string `json:"title"`
}

// actionError is the message of a failed action.
func actionError(err error, timeout time.Duration) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("timed out after %v (raise timeout_ms, at most the profile's max_action_timeout)", timeout)
	}
	return err.Error()
}

// liveSession reports whether the sandbox has an actions session whose
// connection is up.
func (m *Manager) liveSession(sandboxID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[sandboxID]
	return s != nil && !s.dead()
}

// session returns the sandbox's actions session, opening it if needed.
func (m *Manager) session(ctx context.Context, t *Target) (*session, error) {
	m.mu.Lock()
	s := m.sessions[t.SandboxID]
	if s != nil && s.dead() {
		delete(m.sessions, t.SandboxID)
		s = nil
	}
	m.mu.Unlock()
	if s != nil {
		return s, nil
	}
	var notice func()
	if m.cfg.Trace != nil {
		tenant, id := t.Tenant, t.SandboxID
		notice = func() { m.noticeDownloads(tenant, id) }
	}
	s, err := openSession(ctx, t, notice)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.sessions[t.SandboxID]; old != nil && !old.dead() {
		s.close()
		return old, nil
	}
	m.sessions[t.SandboxID] = s
	return s, nil
}

// do runs one action on the active tab.
func (s *session) do(ctx context.Context, tenant string, a api.BrowserAction, timeout time.Duration, r *ActionResult, keep Keeper) error {
	kind := actions[a.Type]
	if kind.tab != nil {
		return kind.tab(s, ctx, a, timeout, r)
	}
	if kind.page == nil {
		return fmt.Errorf("action %q has no handler: %w", a.Type, errdefs.ErrInternal)
	}
	tc, ok := s.tabs[s.active]
	if !ok || tc.ctx.Err() != nil {
		if _, err := s.newTab(ctx, ""); err != nil {
			return err
		}
		tc = s.tabs[s.active]
	}
	v, err := withDeadline(ctx, tc.ctx, func(c context.Context) (any, error) {
		c, cancel := context.WithTimeout(c, timeout)
		defer cancel()
		return kind.page(s, c, a)
	})
	if err != nil {
		return err
	}
	if shot, ok := v.([]byte); ok && kind.image {
		s.shots++
		name := a.Name
		if name == "" {
			ext := "png"
			if a.Format == "jpeg" {
				ext = "jpg"
			}
			name = fmt.Sprintf("screenshot-%d.%s", s.shots, ext)
		}
		if a.Keep != nil && !*a.Keep {
			mime := "image/png"
			if a.Format == "jpeg" {
				mime = "image/jpeg"
			}
			r.Value = api.BrowserImage{MIME: mime, Data: shot}
			return nil
		}
		if keep == nil {
			return fmt.Errorf("screenshots are not kept on this service (ask for keep false to get them in the answer): %w", errdefs.ErrUnavailable)
		}
		art, err := keep.KeepBytes(ctx, tenant, s.t.SandboxID, name, bytes.NewReader(shot))
		if err != nil {
			return fmt.Errorf("keeping the screenshot: %w", err)
		}
		r.Artifact = art
		return nil
	}
	r.Value = v
	return nil
}

// listTabs lists the browser's pages.
// waitGone waits, up to timeout, until the browser no longer lists the
// target id.
func (s *session) waitGone(ctx context.Context, id target.ID, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		infos, err := withDeadline(ctx, s.bctx, func(c context.Context) ([]*target.Info, error) { return chromedp.Targets(c) })
		if err != nil {
			return fmt.Errorf("tab %s was closed, but listing the tabs failed: %w", id, err)
		}
		if !slices.ContainsFunc(infos, func(in *target.Info) bool { return in.TargetID == id }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("tab %s was closed but is still listed after %v: %w", id, timeout, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (s *session) listTabs(ctx context.Context) ([]api.BrowserTab, error) {
	infos, err := withDeadline(ctx, s.bctx, func(c context.Context) ([]*target.Info, error) { return chromedp.Targets(c) })
	if err != nil {
		return nil, err
	}
	tabs := []api.BrowserTab{}
	for _, in := range infos {
		if in.Type == "page" {
			tabs = append(tabs, api.BrowserTab{ID: string(in.TargetID), URL: in.URL, Title: in.Title, Active: in.TargetID == s.active})
		}
	}
	return tabs, nil
}

// point is a viewport position.
type point struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// findScript declares a function (sel, ms) that answers the centre of
// the first element matching the CSS selector sel once it is visible,
// after scrolling it to the middle of the viewport, and gives up after
// ms. A malformed selector throws at once. It is constant: the click
// calls it with its selector and time left as arguments
// (Runtime.callFunctionOn), so V8 compiles it once.
const findScript = `(sel, ms) => new Promise((resolve, reject) => {
  const end = Date.now() + ms;
  const tick = () => {
    let e;
    try { e = document.querySelector(sel); } catch (err) { reject(err); return; }
    if (e) {
      e.scrollIntoView({block: 'center', inline: 'center', behavior: 'instant'});
      const r = e.getBoundingClientRect(), st = getComputedStyle(e);
      if (r.width > 0 && r.height > 0 && st.visibility !== 'hidden') {
        resolve({x: r.left + r.width / 2, y: r.top + r.height / 2});
        return;
      }
    }
    if (Date.now() >= end) { reject(new Error('no visible element matches ' + sel)); return; }
    setTimeout(tick, 20);
  };
  tick();
})`

// clickTarget is findScript called with sel and ms, as one expression.
func clickTarget(sel string, ms int64) string {
	return fmt.Sprintf("(%s)(%s, %d)", findScript, jsString(sel), ms)
}

// remaining is how long c has left, in ms (the action timeout sets it).
func remaining(c context.Context) int64 {
	if d, ok := c.Deadline(); ok {
		return max(time.Until(d).Milliseconds()-50, 0)
	}
	return 10000
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// maxSnapshotLines bounds an accessibility snapshot.
const maxSnapshotLines = 5000

// Snapshot is the snapshot action's value: the page's accessibility tree,
// one node a line ("  role "name" value"), indented by depth, ignored
// nodes left out.
type Snapshot struct {
	Text      string `json:"text"`
	Nodes     int    `json:"nodes"`
	Truncated bool   `json:"truncated,omitempty"`
}

func snapshot(c context.Context) (*Snapshot, error) {
	res, err := chromedp.Call(c, accessibility.GetFullAXTree, accessibility.GetFullAXTreeParams{})
	if err != nil {
		return nil, err
	}
	byID := map[accessibility.NodeID]*accessibility.Node{}
	var roots []*accessibility.Node
	for _, n := range res.Nodes {
		byID[n.NodeID] = n
	}
	for _, n := range res.Nodes {
		if _, ok := byID[n.ParentID]; !ok {
			roots = append(roots, n)
		}
	}
	str := func(v *accessibility.Value) string {
		if v == nil || len(v.Value) == 0 {
			return ""
		}
		var s string
		if json.Unmarshal(v.Value, &s) == nil {
			return s
		}
		return string(v.Value)
	}
	out := &Snapshot{}
	var b strings.Builder
	lines := 0
	var walk func(n *accessibility.Node, depth int)
	walk = func(n *accessibility.Node, depth int) {
		if out.Truncated {
			return
		}
		role := str(n.Role)
		shown := !n.Ignored && role != "none" && role != "generic" && role != "InlineTextBox"
		if shown {
			if lines >= maxSnapshotLines {
				out.Truncated = true
				return
			}
			b.WriteString(strings.Repeat("  ", depth) + role)
			if name := str(n.Name); name != "" {
				b.WriteString(" " + jsString(name))
			}
			if val := str(n.Value); val != "" {
				b.WriteString(" value=" + jsString(val))
			}
			b.WriteByte('\n')
			lines++
			out.Nodes++
			depth++
		}
		for _, id := range n.ChildIDs {
			if ch := byID[id]; ch != nil {
				walk(ch, depth)
			}
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	out.Text = b.String()
	return out, nil
}
