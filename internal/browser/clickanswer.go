package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// A click's answer (the page's URL and title after it) is pushed by the
// page instead of asked for once the release is answered, which saves
// the answer's round trip through the sandbox's agent. The click's own
// evaluate (the one that finds the element; for a click at a point, one
// sent ahead of the press) runs in an isolated world of the tab's page
// and arms a listener there: at the end of the click event's way up, on
// the window, after the page's own listeners of the element and its
// ancestors, the listener reads document.location.href and document.title
// and calls the world's binding, whose call Chromium sends to the service
// as an event (Runtime.bindingCalled). If that event is in by the time the
// release is answered, it is the answer; if not, the answer is read as
// before, one evaluate after the release.
//
// The listener pushes nothing, so the answer is read after the release,
// when what follows the click event could still change the URL or title:
// a click on a link or an area with an href, a label, a summary, a select
// or option, a form's button, an input other than a text field, or an
// element with popovertarget or commandfor (their default actions run
// after the event; a default prevented runs nothing); a click the page
// stopped on its way up; a click whose event the page did not get where
// the service pressed (a zoomed page, a frame's element). The world and
// its binding are the service's: the page's scripts see neither, so a page
// cannot forge an answer or see that it is watched.

// clickBinding is the name of the binding the actions world's listener
// calls; clickWorld is the name of that world.
const (
	clickBinding = "genesisClickAnswer"
	clickWorld   = "genesis-actions"
)

// world is what the session set up in a tab for the actions world: once
// per tab, the binding and the listener for every new document (the
// world made with it); then the world of the document open then, made
// when first needed. The browser reports the worlds' contexts
// (wsConn.world).
type world struct {
	registered bool
}

// clickAnswer is the payload of a call of clickBinding: where the click
// event was, and the page's URL and title after its handlers.
type clickAnswer struct {
	X     float64 `json:"x"`
	Y     float64 `json:"y"`
	URL   string  `json:"url"`
	Title string  `json:"title"`
}

// listenScript sets up the actions world's listener: a trusted click
// event that reaches the window on its way up pushes its point and the
// page's answer, unless the click has a default action that may still
// navigate or run the page's handlers. The listener is made the window's
// last (removed and added again) by each click by selector and after each
// click event, so that it runs after the page's window listeners added
// before. Before anything else it checks that it runs in the actions
// world (a context id reused by a new page could name another). A block:
// the evaluates that include it declare nothing global.
const listenScript = `{
if (typeof genesisClickAnswer !== 'function') throw new Error('genesis: not the actions world');
if (window === window.top) {
const activates = (e) => e instanceof Element && (e.matches('a[href], area[href], label, summary, select, option, [popovertarget], [commandfor]') ||
  (e.localName === 'input' && !/^(text|search|email|url|tel|password)$/.test(e.type)) ||
  (e.localName === 'button' && e.form !== null));
const last = (h) => { window.removeEventListener('click', h); window.addEventListener('click', h); };
const h = globalThis.__genesisClick ||= (ev) => {
  last(h);
  if (!ev.isTrusted || (!ev.defaultPrevented && ev.composedPath().some(activates))) return;
  genesisClickAnswer(JSON.stringify({x: ev.clientX, y: ev.clientY, url: document.location.href, title: document.title}));
};
last(h);
}
}`

// notTheWorld reports whether err says the world's context is gone (the
// page navigated) or is not the actions world.
func notTheWorld(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "Cannot find context") || strings.Contains(msg, "genesis: not the actions world")
}

// tabWorld answers the actions world of the page of the action's
// context c, set up if need be, and whether it was made just now (its
// listener is then not yet set up: the caller's evaluate includes
// listenScript). fresh asks for a new one (the one known is gone).
func (s *session) tabWorld(c context.Context, fresh bool) (runtime.ExecutionContextID, bool, error) {
	t := chromedp.FromContext(c).Target
	conn := s.alloc.conn.Load()
	if t == nil || conn == nil {
		return 0, false, chromedp.ErrInvalidContext
	}
	if s.worlds == nil {
		s.worlds = map[target.ID]*world{}
	}
	w := s.worlds[t.TargetID]
	if w == nil {
		w = &world{}
		s.worlds[t.TargetID] = w
	}
	if !w.registered {
		// Every new document of the tab gets the world with its listener
		// (and the browser reports the world's context before it answers).
		if err := s.send(c,
			command{Method: runtime.CommandAddBinding, Params: runtime.AddBindingParams{Name: clickBinding, ExecutionContextName: clickWorld}},
			command{Method: page.CommandAddScriptToEvaluateOnNewDocument, Params: page.AddScriptToEvaluateOnNewDocumentParams{Source: listenScript, WorldName: clickWorld}},
		); err != nil {
			return 0, false, err
		}
		w.registered = true
	}
	// A page target's main frame has the target's id.
	if id := conn.world(t.SessionID, string(t.TargetID)); id != 0 && !fresh {
		return id, false, nil
	}
	var res page.CreateIsolatedWorldResult
	if err := s.send(c, command{Method: page.CommandCreateIsolatedWorld, Params: page.CreateIsolatedWorldParams{FrameID: cdp.FrameID(t.TargetID), WorldName: clickWorld}, Result: &res}); err != nil {
		return 0, false, err
	}
	return res.ExecutionContextID, true, nil
}

// errNoWorld is evalWorld's error when the actions world could not be
// set up or reached: the caller goes on without it.
var errNoWorld = errors.New("the actions world is not there")

// inWorld runs f in the actions world of c's page, made (or made again,
// once, after a navigation) as needed; errNoWorld if that fails.
func inWorld[T any](s *session, c context.Context, f func(runtime.ExecutionContextID) (T, error)) (T, error) {
	var zero T
	id, _, err := s.tabWorld(c, false)
	if err != nil {
		return zero, fmt.Errorf("%w: %v", errNoWorld, err)
	}
	v, err := f(id)
	if notTheWorld(err) {
		if id, _, err = s.tabWorld(c, true); err != nil {
			return zero, fmt.Errorf("%w: %v", errNoWorld, err)
		}
		v, err = f(id)
		if notTheWorld(err) {
			return zero, fmt.Errorf("%w: %v", errNoWorld, err)
		}
	}
	return v, err
}

// findInWorld is findScript for the actions world: it sets up the
// listener (listenScript) first. Constant, as findScript is.
const findInWorld = "function (sel, ms) {\n" + listenScript + "\nreturn (" + findScript + ")(sel, ms);\n}"

// listenClicks answers the channel of the click answers pushed by c's
// page, emptied of earlier clicks' (nil if there is none).
func (s *session) listenClicks(c context.Context) chan string {
	conn := s.alloc.conn.Load()
	t := chromedp.FromContext(c).Target
	if conn == nil || t == nil {
		return nil
	}
	ch := conn.listen(t.SessionID)
	for {
		select {
		case <-ch:
			continue
		default:
		}
		return ch
	}
}

// pendingAnswer is a click's answer the page may still push.
type pendingAnswer struct {
	ch chan string
	pt point
}

// match reports whether payload p is the answer of the click at pt: its
// event was where the service pressed (within the rounding of the
// event's coordinates).
func (pa *pendingAnswer) match(p string) (pageInfo, bool) {
	var a clickAnswer
	if json.Unmarshal([]byte(p), &a) != nil || math.Abs(a.X-pa.pt.X) > 1.5 || math.Abs(a.Y-pa.pt.Y) > 1.5 {
		return pageInfo{}, false
	}
	return pageInfo{URL: a.URL, Title: a.Title}, true
}

// clickAt presses and releases the left button at pt (mouseClick) and
// ends when Chromium has answered both or, if sooner, when the page
// pushed the click's answer on ch (nil: none comes): the page sends it
// while it handles the click, after the press and release were
// dispatched to it, and Chromium's answer to the release may come a
// frame later. The answer is kept for the request (s.answer); else what
// may still come is (s.pending, for readAnswer).
func (s *session) clickAt(c context.Context, ch chan string, pt point) error {
	if ch == nil {
		return s.mouseClick(c, pt.X, pt.Y)
	}
	// The send goes on after an answer pushed first, until Chromium
	// answers or c (the action's) ends.
	sent := make(chan error, 1)
	go func() { sent <- s.mouseClick(c, pt.X, pt.Y) }()
	pa := &pendingAnswer{ch, pt}
	for {
		select {
		case err := <-sent:
			if err != nil {
				return err
			}
			if info, ok := pa.taken(); ok {
				s.answer = &info
				s.pushedAnswers++
			} else {
				s.pending = pa
			}
			return nil
		case p := <-ch:
			if info, ok := pa.match(p); ok {
				s.answer = &info
				s.pushedAnswers++
				return nil
			}
		}
	}
}

// taken is the click's answer if the page pushed it by now.
func (pa *pendingAnswer) taken() (pageInfo, bool) {
	for {
		select {
		case p := <-pa.ch:
			if info, ok := pa.match(p); ok {
				return info, true
			}
		default:
			return pageInfo{}, false
		}
	}
}

// readAnswer is the answer's URL and title after the last action: the
// page's push after a click if it is in; otherwise read with an evaluate
// and, after a click whose push may still come, the push if it comes
// first. (The push is sent while the page handles the click, and the
// evaluate's answer comes on the same DevTools session after it, so a
// push that was sent is taken.) ok is false if the page could not be
// read.
func (s *session) readAnswer(ctx context.Context, tc tabCtx) (pageInfo, bool) {
	if s.answer != nil {
		return *s.answer, true
	}
	// evalPage ends when its context does, so the request's end cancels
	// it, with no goroutine of withDeadline's to wait on.
	c, cancel := context.WithTimeout(tc.ctx, 2*time.Second)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	read := func() (pageInfo, bool) {
		info, err := evalPage[pageInfo](s, c, `({url: document.location.href, title: document.title})`, false)
		return info, err == nil
	}
	pa := s.pending
	if pa == nil {
		return read()
	}
	type result struct {
		info pageInfo
		ok   bool
	}
	res := make(chan result, 1)
	go func() {
		info, ok := read()
		res <- result{info, ok}
	}()
	for {
		select {
		case p := <-pa.ch:
			if info, ok := pa.match(p); ok {
				s.pushedAnswers++
				return info, true
			}
		case r := <-res:
			if info, ok := pa.taken(); ok {
				s.pushedAnswers++
				return info, true
			}
			return r.info, r.ok
		}
	}
}
