package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/testenv"
)

// consoleBrowser is one headless Chromium for a whole test; each tab
// (consoleTab) has its own sessionStorage, so its own signed-in key.
type consoleBrowser struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string // console errors, uncaught exceptions and error log entries of every tab
}

// newConsoleBrowser starts Chromium for the test; it is stopped at cleanup.
func newConsoleBrowser(t *testing.T) *consoleBrowser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(testenv.Chromium(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		// Tests reach only loopback: no name is looked up but *.localhost.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost, EXCLUDE *.localhost"),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	// The first Run starts the browser under ctx, which has no deadline:
	// each step below runs under one of its own.
	if err := chromedp.Do(ctx); err != nil {
		acancel()
		t.Fatalf("starting chromium: %v", err)
	}
	t.Cleanup(func() { cancel(); acancel() })
	return &consoleBrowser{ctx: ctx}
}

// consoleTab is one tab of the browser at 1280×860.
type consoleTab struct {
	b     *consoleBrowser
	who   string
	ctx   context.Context
	close context.CancelFunc
	base  string
}

// pageWatch records, in every page the tab loads, each CSP violation
// and the load events of media elements (they do not bubble: caught on
// their way down), from the start, so a check cannot miss one that fired
// before it looked.
const pageWatch = `window.__csp = []; window.__media = [];
document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
for (const type of ['loadedmetadata', 'loadeddata', 'error']) {
	document.addEventListener(type, (e) => { if (e.target instanceof HTMLMediaElement) window.__media.push({type, src: e.target.currentSrc || e.target.src}); }, true);
}`

// tab opens a new tab named who (for its error messages), or attaches to
// the existing target id.
func (b *consoleBrowser) tab(t *testing.T, who, base string, opts ...chromedp.ContextOption) *consoleTab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx, opts...)
	t.Cleanup(func() { cancel() })
	tab := &consoleTab{b: b, who: who, ctx: ctx, close: cancel, base: base}
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("tab %s: %v", who, err)
	}
	if err := chromedp.Listen(ctx, func(ev any) {
		var msg string
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, strings.Trim(string(a.Value), `"`)+a.Description)
				}
				msg = "console.error: " + strings.Join(parts, " ")
			}
		case *runtime.EventExceptionThrown:
			msg = "exception: " + ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				msg += " " + ev.ExceptionDetails.Exception.Description
			}
		case *log.EventEntryAdded:
			// Chromium fails the requests in flight with
			// ERR_NETWORK_CHANGED when the host's network interfaces
			// change, which they do whenever a test beside this one
			// makes or removes a Docker network: the host's doing, not
			// the console's. The console retries (the viewer's long
			// polls after 2 s), and the views are still checked for what
			// they show.
			if ev.Entry.Level == log.EntryLevelError && !strings.Contains(ev.Entry.Text, "net::ERR_NETWORK_CHANGED") {
				msg = fmt.Sprintf("%s: %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL)
			}
		}
		if msg != "" {
			b.mu.Lock()
			b.errors = append(b.errors, who+": "+msg)
			b.mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	tab.run(t, "set up", chromedp.EmulateViewport(1280, 860), chromedp.Func(func(ctx context.Context, tt *chromedp.Target) error {
		_, err := cdp.Call(ctx, tt, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: pageWatch})
		return err
	}))
	return tab
}

// errorsSince answers the browser's errors after the first n.
func (b *consoleBrowser) errorsSince(n int) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.errors[min(n, len(b.errors)):])
}

// run runs steps in the tab under one deadline, failing t with what.
func (c *consoleTab) run(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, callTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s (%s): %v", what, c.who, err)
	}
}

// eval evaluates a JavaScript expression (awaiting a promise) into out.
func (c *consoleTab) eval(t *testing.T, expr string, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, callTimeout)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: evaluating %s: %v", c.who, strings.SplitN(strings.TrimSpace(expr), "\n", 2)[0], err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s: %s answered %s: %v", c.who, expr, raw, err)
		}
	}
}

// wait polls a JavaScript predicate until it is truthy (30 s).
func (c *consoleTab) wait(t *testing.T, what, predicate string) {
	t.Helper()
	c.run(t, "waiting for "+what, chromedp.Poll[chromedp.Void](predicate, chromedp.WithPollingInterval(100*time.Millisecond)))
}

// open shows a console view (#/path) of the signed-in tab, as a click on
// a link does (the console routes by the fragment), and waits for the new
// view's heading. The same view again is asked for with an extra query
// parameter, so that it renders anew.
func (c *consoleTab) open(t *testing.T, hash string) {
	t.Helper()
	c.eval(t, `(() => {
		const v = document.querySelector('main .view'); if (v) v.dataset.old = '1';
		let h = '#' + `+js(hash)+`;
		if (location.hash === h) h += (h.includes('?') ? '&' : '?') + 'again=' + Date.now();
		location.hash = h;
		return true;
	})()`, nil)
	c.wait(t, hash+" to render", `document.querySelector('main .view:not([data-old]) h1')`)
}

// signIn signs the tab in with key.
func (c *consoleTab) signIn(t *testing.T, key string) {
	t.Helper()
	c.run(t, "signing in", chromedp.Navigate(c.base+"/console/"), chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), key), chromedp.Click(chromedp.CSS("#signin")))
	c.wait(t, "the sandboxes view", `document.querySelector('#count')`)
}

// shot saves a full-page screenshot as NAME.png in dir.
func (c *consoleTab) shot(t *testing.T, dir, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, callTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Error(err)
	}
}

// js quotes s as a JavaScript string.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestConsoleViews drives the console in one Chromium (chromedp) against
// one service, step by step, under runc and runsc: lists newest first with
// destroyed sandboxes hidden until asked and shown as ended; a session's
// job listed as the user's script, a timed-out and a canceled job saying
// so; a paused agent's step in the trace player; a desktop sandbox's own
// page with Live view, Take over and Release; the trace player playing a
// recorded video segment (the CSP lets its blob: video load: a frame is
// decoded and presented); holder and metadata markup shown as text; the
// tenants' usage; the audit table fitting 1280 px; and lease waits of E2B
// and OpenSandbox creates in the System view's chart.
func TestConsoleViews(t *testing.T) {
	adminKey := "admin_" + randomHex(t, 16)
	e := newEnv(t, fmt.Sprintf("admin_api_key: %q\n", adminKey))
	e.requireImage(t, "tool-basic")
	e.requireImage(t, "desktop-vnc")
	svc := e.start(t)
	requireConsoleBuilt(t, svc)
	c := svc.client()
	admin := client.New(svc.url(), adminKey)
	b := newConsoleBrowser(t)
	user := b.tab(t, "tenant", svc.url())
	user.signIn(t, e.apiKey)
	adm := b.tab(t, "admin", svc.url())
	adm.signIn(t, adminKey)

	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			shots := consoleArtifacts(t, "views-"+rt)
			create := func(profile string, md map[string]string) *client.Sandbox {
				t.Helper()
				if profile == "desktop-vnc" {
					return createDesktop(t, c, rt)
				}
				req := client.CreateSandboxRequest{Profile: profile, Runtime: rt, Metadata: md}
				if rt == "runc" {
					req.RiskLevel = "low"
				}
				return e.createSandbox(t, req)
			}
			gone := create("tool-basic", map[string]string{"step": "gone"})
			if err := c.DeleteSandbox(callCtx(t), gone.ID); err != nil {
				t.Fatal(err)
			}
			sb := create("tool-basic", map[string]string{"note": `<b id="pwned-meta">bold</b>`})
			desk := create("desktop-vnc", nil)

			t.Run("sandbox list", func(t *testing.T) {
				user.open(t, "/sandboxes")
				user.wait(t, "the desktop sandbox listed", `document.querySelector('tr[data-id=`+js(desk.ID)+`]')`)
				var ids []string
				user.eval(t, `[...document.querySelectorAll('tbody tr')].map((r) => r.dataset.id)`, &ids)
				list, err := c.ListSandboxes(callCtx(t), client.ListSandboxesOptions{})
				if err != nil {
					t.Fatal(err)
				}
				created := map[string]time.Time{}
				for _, s := range list.Items {
					created[s.ID] = s.CreatedAt
				}
				if slices.Contains(ids, gone.ID) || !slices.Contains(ids, sb.ID) || slices.Index(ids, desk.ID) > slices.Index(ids, sb.ID) {
					t.Errorf("listed %v: want %s (newer) before %s, and no destroyed %s", ids, desk.ID, sb.ID, gone.ID)
				}
				if !slices.IsSortedFunc(ids, func(a, b string) int { return created[b].Compare(created[a]) }) {
					t.Errorf("listed %v: not newest first", ids)
				}
				// Metadata markup is text.
				var md struct {
					Text    string `json:"text"`
					Element bool   `json:"element"`
				}
				user.eval(t, `({text: document.querySelector('tr[data-id=`+js(sb.ID)+`]').textContent, element: !!document.getElementById('pwned-meta')})`, &md)
				if md.Element || !strings.Contains(md.Text, `note=<b id="pwned-meta">bold</b>`) {
					t.Errorf("metadata markup: element made %v, row text %q", md.Element, md.Text)
				}
				user.shot(t, shots, "sandboxes")
				// The toggle shows the destroyed one, ended.
				user.run(t, "show destroyed", chromedp.Click(chromedp.CSS("#show-destroyed")))
				user.wait(t, "the destroyed sandbox", `location.hash.includes('destroyed=1') && document.querySelector('tr[data-id=`+js(gone.ID)+`]')`)
				var ended string
				user.eval(t, `document.querySelector('tr[data-id=`+js(gone.ID)+`] .lifetime').textContent`, &ended)
				if !regexp.MustCompile(`^ended \d+ s ago$|^ended \d+ min ago$`).MatchString(ended) {
					t.Errorf("a destroyed sandbox's row says %q, want ended … ago", ended)
				}
				user.shot(t, shots, "sandboxes-destroyed")
				user.open(t, "/sandboxes/"+gone.ID)
				var facts string
				user.eval(t, `document.querySelector('dl.facts').innerText`, &facts)
				if !strings.Contains(facts, "Ended\t") && !strings.Contains(facts, "Ended\n") || strings.Contains(facts, "Expires") {
					t.Errorf("a destroyed sandbox's facts: %q, want Ended and no Expires", facts)
				}
			})

			t.Run("jobs", func(t *testing.T) {
				se, err := c.CreateSession(callCtx(t), sb.ID)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.SessionExec(callCtx(t), se.ID, client.ExecRequest{Script: "cd /tmp && export GREETING=hello"}); err != nil {
					t.Fatal(err)
				}
				const userScript = `echo "$GREETING from $(pwd)"`
				res, err := c.SessionExec(callCtx(t), se.ID, client.ExecRequest{Script: userScript})
				if err != nil || res.Stdout != "hello from /tmp\n" {
					t.Fatalf("session exec: %+v %v", res, err)
				}
				timedOut, err := c.Exec(callCtx(t), sb.ID, client.ExecRequest{Command: []string{"sleep", "30"}, TimeoutMS: 500})
				if err != nil || timedOut.ExitReason != "timeout" {
					t.Fatalf("exec with a timeout: %+v %v", timedOut, err)
				}
				bg, err := c.StartJob(callCtx(t), sb.ID, client.ExecRequest{Command: []string{"sleep", "100"}})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.CancelJob(callCtx(t), bg.ID); err != nil {
					t.Fatal(err)
				}
				eventually(t, 30*time.Second, "the canceled job to end", func() (bool, string) {
					j, err := c.GetJob(callCtx(t), bg.ID)
					return err == nil && j.FinishedAt != nil, fmt.Sprint(j, err)
				})
				user.open(t, "/sandboxes/"+sb.ID)
				user.wait(t, "the jobs", `document.querySelectorAll('#jobs tbody tr').length >= 4`)
				type row struct{ ID, Reason, State, Exit, What string }
				var rows []row
				user.eval(t, `[...document.querySelectorAll('#jobs tbody tr')].map((r) => ({id: r.dataset.id, reason: r.dataset.reason,
					state: r.cells[1].textContent, exit: r.cells[2].textContent, what: r.cells[3].textContent}))`, &rows)
				byID := map[string]row{}
				for _, r := range rows {
					byID[r.ID] = r
					if strings.Contains(r.What, "__gs_") || strings.Contains(r.What, "trap") {
						t.Errorf("job %s is listed as the session's wrapper: %q", r.ID, r.What)
					}
				}
				if r := byID[res.JobID]; r.What != userScript {
					t.Errorf("the session's job is listed as %q, want the user's script %q", r.What, userScript)
				}
				if r := byID[timedOut.JobID]; r.Reason != "timeout" || !strings.Contains(r.State, "timed out") || !strings.HasPrefix(r.Exit, "timed out after 500 ms") {
					t.Errorf("the timed-out job is listed as %+v", r)
				}
				if r := byID[bg.ID]; r.Reason != "canceled" || !strings.HasPrefix(r.Exit, "canceled") || r.What != "sleep 100" {
					t.Errorf("the canceled job is listed as %+v", r)
				}
				user.shot(t, shots, "sandbox-jobs")
				user.open(t, "/jobs/"+timedOut.JobID)
				user.wait(t, "the job's end", `document.querySelector('#exit[data-reason]')`)
				var job struct{ State, Exit, Reason string }
				user.eval(t, `({state: document.getElementById('job-state').textContent, exit: document.getElementById('exit').textContent,
					reason: document.getElementById('exit').dataset.reason})`, &job)
				if job.Reason != "timeout" || !strings.Contains(job.State, "timed out") || !strings.Contains(job.Exit, "timed out after 500 ms") {
					t.Errorf("the timed-out job's page: %+v", job)
				}
				user.shot(t, shots, "job-timed-out")
			})

			t.Run("stepped in the player", func(t *testing.T) {
				for _, op := range []string{"pause", "step"} {
					if _, err := c.InterruptTrace(callCtx(t), sb.ID, op, ""); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := c.Exec(callCtx(t), sb.ID, client.ExecRequest{Command: []string{"true"}}); err != nil {
					t.Fatalf("the stepped exec: %v", err)
				}
				if _, err := c.InterruptTrace(callCtx(t), sb.ID, "resume", ""); err != nil {
					t.Fatal(err)
				}
				user.open(t, "/traces/"+sb.ID)
				user.wait(t, "the stepped event", `document.querySelector('#player-events li[data-kind="interrupt.stepped"]')`)
				var got struct {
					Stepped   string   `json:"stepped"`
					Undefined []string `json:"undefined"`
				}
				user.eval(t, `({stepped: document.querySelector('#player-events li[data-kind="interrupt.stepped"] .player-sum').textContent,
					undefined: [...document.querySelectorAll('#player-events li')].map((l) => l.textContent).filter((x) => x.includes('undefined'))})`, &got)
				if got.Stepped != "let exec through (one step)" || len(got.Undefined) > 0 {
					t.Errorf("the player: stepped %q; events that print undefined: %q", got.Stepped, got.Undefined)
				}
			})

			t.Run("desktop page", func(t *testing.T) {
				user.open(t, "/sandboxes/"+desk.ID)
				user.wait(t, "the desktop section", `document.querySelector('#desktop button[data-action="takeover"]')`)
				// The buttons open the live view in a new tab: the test keeps
				// the URL and opens it in a tab of its own.
				user.eval(t, `(window.__opened = [], window.open = (u) => { window.__opened.push(u); return null; }, true)`, nil)
				user.run(t, "take over", chromedp.Click(chromedp.CSS(`#desktop button[data-action="takeover"]`)))
				user.wait(t, "the person's control", `document.querySelector('#desktop .holder')?.textContent.includes('human:default')`)
				if st, err := c.DesktopControl(callCtx(t), desk.ID, -1, 0); err != nil || st.Holder != "human:default" {
					t.Errorf("control after Take over: %+v %v", st, err)
				}
				checkViewer := func(role string) {
					t.Helper()
					var opened []string
					user.eval(t, `window.__opened`, &opened)
					if len(opened) == 0 || !strings.Contains(opened[len(opened)-1], "/viewer") {
						t.Fatalf("the live view was not opened: %q", opened)
					}
					v := b.tab(t, "viewer", svc.url())
					defer v.close()
					v.run(t, "opening the live view", chromedp.Navigate(opened[len(opened)-1]))
					v.wait(t, "the live view to connect", `document.body.dataset.state === 'connected'`)
					var got string
					v.eval(t, `document.body.dataset.role`, &got)
					if got != role {
						t.Errorf("the live view's role is %q, want %s", got, role)
					}
					v.shot(t, shots, "live-view-"+role)
				}
				checkViewer("controller")
				user.shot(t, shots, "desktop-sandbox-taken")
				user.eval(t, `(window.__opened = [], window.open = (u) => { window.__opened.push(u); return null; }, true)`, nil)
				user.run(t, "release", chromedp.Click(chromedp.CSS(`#desktop button[data-action="release"]`)))
				user.wait(t, "control back with the agent", `document.querySelector('#desktop .holder')?.textContent === 'the agent may act'`)
				user.eval(t, `(window.__opened = [], window.open = (u) => { window.__opened.push(u); return null; }, true)`, nil)
				user.run(t, "live view", chromedp.Click(chromedp.CSS(`#desktop button[data-action="observe"]`)))
				user.wait(t, "the live view link", `window.__opened && window.__opened.length > 0`)
				checkViewer("observer")
				if st, err := c.DesktopControl(callCtx(t), desk.ID, -1, 0); err != nil || st.Holder != "" {
					t.Errorf("control after Release and an observer: %+v %v", st, err)
				}
			})

			t.Run("holder markup is text", func(t *testing.T) {
				// Markup never becomes a holder's name: the service refuses it.
				_, err := c.TakeDesktopControl(callCtx(t), desk.ID, client.TakeDesktopControlRequest{Holder: `human:<img id="pwned-holder" src="x">`, Reason: "a test"})
				if client.ErrorCode(err) != "invalid_holder" {
					t.Fatalf("a holder with markup: %v, want 400 invalid_holder", err)
				}
				// A reason is free text: it is shown as text wherever it is shown.
				const holder = "human:mallory@example.test"
				if _, err := c.TakeDesktopControl(callCtx(t), desk.ID, client.TakeDesktopControlRequest{Holder: holder, Reason: `<img id="pwned-reason" src="x">`}); err != nil {
					t.Fatal(err)
				}
				defer c.ReleaseDesktopControl(callCtx(t), desk.ID)
				for _, view := range []string{"/sandboxes/" + desk.ID, "/desktop", "/traces/" + desk.ID} {
					user.open(t, view)
					user.wait(t, "the holder on "+view, `document.querySelector('main').textContent.includes(`+js(holder)+`)`)
					var element bool
					user.eval(t, `!!document.getElementById('pwned-reason')`, &element)
					if element {
						t.Errorf("%s made an element of the control's reason", view)
					}
				}
			})

			t.Run("trace video plays", func(t *testing.T) {
				if _, err := c.StartRecording(callCtx(t), desk.ID, client.RecordingRequest{FPS: 5, SegmentSeconds: 1}); err != nil {
					t.Fatal(err)
				}
				// A second start answers 409 recording_active (a long code
				// for the audit table below).
				if _, err := c.StartRecording(callCtx(t), desk.ID, client.RecordingRequest{}); client.ErrorCode(err) != "recording_active" {
					t.Errorf("a second recording: %v", err)
				}
				eventually(t, 30*time.Second, "two video segments", func() (bool, string) {
					n := len(traceSegments(t, c, desk.ID))
					return n >= 2, fmt.Sprintf("%d segments", n)
				})
				if _, err := c.StopRecording(callCtx(t), desk.ID); err != nil {
					t.Fatal(err)
				}
				user.open(t, "/traces/"+desk.ID)
				user.wait(t, "the segment in the video element", `document.getElementById('player-video')?.getAttribute('src')?.startsWith('blob:')`)
				// The segment loads (loadeddata fired for its blob: URL, and
				// no error) and its first frame is decoded (it has a size).
				// The player seeks into the segment once it has loaded, which
				// may take readyState back down for a moment: wait for both.
				user.wait(t, "the segment's data or an error", `(() => { const v = document.getElementById('player-video');
					return v.error || window.__media.some((m) => m.type === 'error') ||
						(window.__media.some((m) => m.type === 'loadeddata' && m.src === v.currentSrc) && v.readyState >= 2); })()`)
				var loaded struct {
					ReadyState, Width, Height int
					Error                     string
					Media                     []struct{ Type, Src string }
				}
				user.eval(t, `(() => { const v = document.getElementById('player-video');
					return {readyState: v.readyState, width: v.videoWidth, height: v.videoHeight,
						error: v.error ? v.error.code + ' ' + v.error.message : '', media: window.__media}; })()`, &loaded)
				if loaded.Error != "" {
					var csp []string
					user.eval(t, `window.__csp`, &csp)
					t.Fatalf("the video did not load: %s (media events %+v, CSP violations %q)", loaded.Error, loaded.Media, csp)
				}
				if loaded.ReadyState < 2 || loaded.Width <= 0 || loaded.Height <= 0 {
					t.Errorf("the loaded video: %+v", loaded)
				}
				// Play: a decoded frame is presented.
				user.eval(t, `(window.__frame = new Promise((resolve, reject) => {
					const v = document.getElementById('player-video');
					v.requestVideoFrameCallback((now, m) => resolve({width: m.width, frames: m.presentedFrames, time: m.mediaTime}));
					setTimeout(() => reject(new Error('no frame presented in 30 s: readyState ' + v.readyState + ', paused ' + v.paused)), 30000);
				}), true)`, nil)
				user.run(t, "play", chromedp.Click(chromedp.CSS("#player-play")))
				var frame struct {
					Width  int     `json:"width"`
					Frames int     `json:"frames"`
					Time   float64 `json:"time"`
				}
				user.eval(t, `window.__frame`, &frame)
				if frame.Width != loaded.Width || frame.Frames < 1 {
					t.Errorf("the presented frame: %+v (loaded %+v)", frame, loaded)
				}
				var csp []string
				user.eval(t, `window.__csp`, &csp)
				if len(csp) > 0 {
					t.Errorf("CSP violations: %q", csp)
				}
				user.shot(t, shots, "trace-video")
			})

			t.Run("tenant usage", func(t *testing.T) {
				adm.open(t, "/tenants")
				var want, got string
				for deadline := time.Now().Add(30 * time.Second); ; {
					tn, err := admin.GetTenant(callCtx(t), "default")
					if err != nil || tn.Usage == nil {
						t.Fatalf("tenant: %+v %v", tn, err)
					}
					want = fmt.Sprintf("%d / ∞", tn.Usage.Sandboxes)
					adm.open(t, "/tenants")
					adm.eval(t, `document.querySelector('tr[data-name="default"]').cells[4].textContent`, &got)
					if got == want && tn.Usage.Sandboxes >= 2 || time.Now().After(deadline) {
						break
					}
				}
				if got != want {
					t.Errorf("the default tenant's sandboxes read %q, want %q", got, want)
				}
				adm.shot(t, shots, "tenants")
			})
		})
	}

	t.Run("audit fits 1280 px", func(t *testing.T) {
		// Records with a long action and a long code.
		req := client.CreateSandboxRequest{Profile: "tool-basic"}
		sb := e.createSandbox(t, req)
		auth := map[string]string{"Authorization": "Bearer " + e.apiKey}
		if code, body := e2bRequest(t, "POST", svc.url()+"/v1/sandboxes/"+sb.ID+"/exec", `{"command":["cat"],"stdin_stream":true}`, auth); code != 400 || !strings.Contains(body, "stdin_stream_needs_background") {
			t.Errorf("a synchronous exec with stdin_stream: %d %s", code, body)
		}
		if code, body := e2bRequest(t, "POST", svc.url()+"/v1/sandboxes/"+sb.ID+"/browser/downloads/keep", `{}`, auth); code/100 != 4 {
			t.Errorf("keeping a download of a sandbox without a browser: %d %s", code, body)
		}
		adm.open(t, "/audit?limit=500")
		adm.wait(t, "the records", `document.querySelectorAll('#audit-rows tr').length > 20`)
		var fit struct{ Scroll, Client, Rows int }
		adm.eval(t, `(() => { const w = document.getElementById('audit-table').parentElement;
			return {scroll: w.scrollWidth, client: w.clientWidth, rows: document.querySelectorAll('#audit-rows tr').length}; })()`, &fit)
		if fit.Scroll > fit.Client {
			t.Errorf("the audit table of %d records is %d px wide in %d px: it scrolls sideways", fit.Rows, fit.Scroll, fit.Client)
		}
		adm.shot(t, consoleArtifacts(t, "views"), "audit")
	})

	t.Run("lease wait", func(t *testing.T) {
		code, body := e2bCall(t, svc.url(), e.apiKey, "POST", "/e2b/sandboxes", `{"templateID":"base","timeout":60}`)
		if code != 201 {
			t.Fatalf("E2B create: %d %s", code, body)
		}
		var eb struct{ SandboxID string }
		_ = json.Unmarshal([]byte(body), &eb)
		defer e2bCall(t, svc.url(), e.apiKey, "DELETE", "/e2b/sandboxes/"+eb.SandboxID, "")
		code, body = e2bRequest(t, "POST", svc.url()+"/opensandbox/v1/sandboxes", `{"image":{"uri":"ubuntu"},"timeout":300,"entrypoint":["tail","-f","/dev/null"]}`,
			map[string]string{"OPEN-SANDBOX-API-KEY": e.apiKey})
		if code != 202 {
			t.Fatalf("OpenSandbox create: %d %s", code, body)
		}
		var ob struct{ ID string }
		_ = json.Unmarshal([]byte(body), &ob)
		defer e2bRequest(t, "DELETE", svc.url()+"/opensandbox/v1/sandboxes/"+ob.ID, "", map[string]string{"OPEN-SANDBOX-API-KEY": e.apiKey})
		user.open(t, "/system")
		user.wait(t, "the lease wait chart", `[...document.querySelectorAll('figure')].some((f) => f.textContent.startsWith('Lease wait'))`)
		var label string
		user.eval(t, `(() => { const f = [...document.querySelectorAll('figure')].find((f) => f.textContent.startsWith('Lease wait'));
			const s = f.querySelector('svg'); return s ? s.getAttribute('aria-label') : f.textContent; })()`, &label)
		n := 0
		for _, m := range regexp.MustCompile(`(\d+) observations`).FindAllStringSubmatch(label, -1) {
			k, _ := strconv.Atoi(m[1])
			n += k
		}
		if n != 2 {
			t.Errorf("the lease wait chart: %q, want the two leases (E2B and OpenSandbox) observed", label)
		}
		user.shot(t, consoleArtifacts(t, "views"), "system")
	})

	if errs := b.errorsSince(0); len(errs) > 0 {
		t.Errorf("browser errors: %q", errs)
	}
}
