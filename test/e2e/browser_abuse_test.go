package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"genesis.dev/sandbox/client"
)

// TestBrowserBadInput: what a careless or hostile caller or page does to a
// browser sandbox stays in it, under runc and runsc. A CDP client that
// sends garbage gets errors and the browser serves the next client; a bad
// selector fails its action only; a tab bomb is bounded by max_actions and
// leaves the browser working; a page that allocates memory without bound
// fails its action within the action's timeout, the sandbox's memory limit
// holds, another browser sandbox and the service carry on, and the bombed
// sandbox can be destroyed.
func TestBrowserBadInput(t *testing.T) {
	t.Parallel()
	e, _ := browserEnv(t, "")
	svc := e.start(t)
	c := svc.client()

	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			// One CPU and 1 GiB each: the bombs below reach the limits
			// sooner and press less on the tests that run beside this one.
			create := func() *client.Sandbox { return createBrowser(t, c, rt, &client.Resources{CPU: 1, MemoryMB: 1024}) }
			actions := func(id string, as ...client.BrowserAction) *client.BrowserActionsResult {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				res, err := c.BrowserActions(ctx, id, as...)
				if err != nil {
					t.Fatalf("actions %+v in %s: %v", as, id, err)
				}
				return res
			}
			works := func(id, what string) {
				t.Helper()
				res := actions(id, client.BrowserAction{Type: "navigate", URL: "http://allowed.test/form"},
					client.BrowserAction{Type: "evaluate", Expression: "6 * 7"})
				if !res.OK || string(res.Results[1].Value) != "42" {
					ev, err := c.NetworkEvents(callCtx(t), id, "", 1000)
					t.Fatalf("%s: the browser does not work: %+v (network events %s)", what, res, fmt_(ev, err))
				}
			}
			a, b := create(), create()
			works(a.ID, "a fresh browser")
			works(b.ID, "a fresh browser")

			// A CDP client that sends garbage: Chromium answers errors or
			// closes that connection; the next client is served.
			st, err := c.BrowserStatus(callCtx(t), a.ID)
			if err != nil {
				t.Fatal(err)
			}
			var v struct {
				WS string `json:"webSocketDebuggerUrl"`
			}
			if code, body := apiJSON(t, svc, "GET", strings.TrimPrefix(st.CDPURL, svc.url())+"/json/version", nil, &v); code != 200 || v.WS == "" {
				t.Fatalf("/json/version: %d %s", code, body)
			}
			hdr := http.Header{"Authorization": {"Bearer " + e.apiKey}}
			cdp := func(msgs ...string) (answers []string) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				ws, _, err := websocket.Dial(ctx, v.WS, &websocket.DialOptions{HTTPHeader: hdr})
				if err != nil {
					t.Fatalf("dial %s: %v", v.WS, err)
				}
				defer ws.CloseNow()
				for _, m := range msgs {
					if err := ws.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
						return append(answers, "write: "+err.Error())
					}
					_, b, err := ws.Read(ctx)
					if err != nil {
						return append(answers, "read: "+err.Error())
					}
					answers = append(answers, string(b))
				}
				return answers
			}
			got := cdp(`{"id":1,"method":"No.such"}`, `{"id":2,"method":"Browser.getVersion","params":"not an object"}`, "\x00\xffnot json at all")
			if len(got) < 2 || !strings.Contains(got[0], `"id":1`) || !strings.Contains(got[0], `"error"`) ||
				!strings.Contains(got[1], `"id":2`) || !strings.Contains(got[1], `"error"`) {
				t.Errorf("garbage CDP messages: %q", got)
			}
			if got := cdp(`{"id":3,"method":"Browser.getVersion"}`); len(got) != 1 || !strings.Contains(got[0], `"product"`) {
				t.Errorf("the next CDP client: %q", got)
			}

			// A bad selector fails its action only.
			res := actions(a.ID, client.BrowserAction{Type: "click", Selector: "#[", TimeoutMs: 2000})
			if res.OK || res.Results[0].Error == "" {
				t.Errorf("a click at a malformed selector: %+v", res)
			}

			// A tab bomb: max_actions bounds one request. Each tab costs a
			// renderer, so many of them press on the sandbox's memory limit
			// and slow it down; however far the caller waits, the browser
			// works again afterwards, with at most the tabs it was asked for.
			bomb := make([]client.BrowserAction, 101) // max_actions is 100
			for i := range bomb {
				bomb[i] = client.BrowserAction{Type: "tab_new", URL: "http://allowed.test/form"}
			}
			if code, body := apiJSON(t, svc, "POST", "/v1/sandboxes/"+a.ID+"/browser/actions", map[string]any{"actions": bomb}, nil); code != 400 || !strings.Contains(body, "too_many_actions") {
				t.Errorf("101 actions: %d %s", code, body)
			}
			bctx, bcancel := context.WithTimeout(context.Background(), 30*time.Second)
			bombed, err := c.BrowserActions(bctx, a.ID, bomb[:40]...)
			bcancel()
			opened := 0
			if bombed != nil {
				for _, r := range bombed.Results {
					if r.OK {
						opened++
					}
				}
			}
			t.Logf("%s: the tab bomb's request: %d tabs opened, error %v", rt, opened, err)
			eventually(t, 3*time.Minute, "the browser answering after the tab bomb", func() (bool, string) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				tabs, err := c.BrowserActions(ctx, a.ID, client.BrowserAction{Type: "tabs"})
				if err != nil {
					return false, err.Error()
				}
				var list []client.BrowserTab
				if !tabs.OK || json.Unmarshal(tabs.Results[0].Value, &list) != nil {
					return false, fmt_(tabs, nil)
				}
				if len(list) > 41 {
					t.Fatalf("%d tabs after a bomb of 40", len(list))
				}
				return true, ""
			})
			works(a.ID, "after the tab bomb")

			// A page that allocates without bound fails within its timeout.
			t0 := time.Now()
			res = actions(a.ID, client.BrowserAction{Type: "evaluate", TimeoutMs: 15000,
				Expression: `(() => { const a = []; for (;;) a.push(new Float64Array(1 << 20).fill(1)); })()`})
			d := time.Since(t0)
			if res.OK || res.Results[0].Error == "" || d > 45*time.Second {
				t.Errorf("a memory bomb: ok=%v error %q after %v", res.OK, res.Results[0].Error, d)
			}
			t.Logf("%s: the memory bomb failed after %v: %s", rt, d.Round(time.Millisecond), res.Results[0].Error)
			// The other browser sandbox and the service carry on.
			works(b.ID, "the other sandbox, after the memory bomb")
			if code, body := apiJSON(t, svc, "GET", "/healthz", nil, nil); code != 200 {
				t.Errorf("healthz after the memory bomb: %d %s", code, body)
			}
			// The bomb's sandbox: under runsc the sandbox is killed (its
			// memory limit is the sentry's), and the reason is recorded;
			// under runc the page's renderer thrashes against the cgroup
			// limit, which the kernel does not resolve by killing it. Either
			// way the service destroys the sandbox on request.
			sb, err := c.GetSandbox(callCtx(t), a.ID)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: after the memory bomb the sandbox is %s %s", rt, sb.State, sb.FailureReason)
			if sb.State == "failed" && !strings.Contains(sb.FailureReason, "oom_killed=true") {
				t.Errorf("the bombed sandbox failed for another reason: %s", sb.FailureReason)
			}
			t0 = time.Now()
			if err := c.DeleteSandbox(callCtx(t), a.ID); err != nil {
				t.Errorf("deleting the bombed sandbox: %v", err)
			}
			t.Logf("%s: the bombed sandbox was destroyed in %v", rt, time.Since(t0).Round(time.Millisecond))
			works(b.ID, "the other sandbox, after the bombed one was destroyed")
		})
	}
}
