package e2e

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"genesis.dev/sandbox/client"
)

// TestTraceBrowser drives a browser session (navigate, fill a text field,
// fill and type into a password field, a sensitive action, a kept
// screenshot) and a shell job in one sandbox under runc and runsc, and
// checks they make one ordered trace with the password never recorded
// (its length is), the screenshot's artifact referenced, and that a paused
// sandbox's next browser action answers 409 paused until resume.
func TestTraceBrowser(t *testing.T) {
	e, _ := browserEnv(t, "")
	svc := e.start(t)
	c := svc.client()
	const secret = "hunter2-Secret"
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := createBrowser(t, c, rt, nil)
			res, err := c.BrowserActions(callCtx(t), sb.ID,
				client.BrowserAction{Type: "navigate", URL: "http://allowed.test/form"},
				client.BrowserAction{Type: "evaluate", Expression: `document.body.insertAdjacentHTML("beforeend", '<input id="pw" type="password">'); 1`},
				client.BrowserAction{Type: "fill", Selector: "#q", Text: "visible words"},
				client.BrowserAction{Type: "fill", Selector: "#pw", Text: secret},
				client.BrowserAction{Type: "type", Selector: "#pw", Text: secret},
				client.BrowserAction{Type: "fill", Selector: "#q", Text: "marked " + secret, Sensitive: true},
				client.BrowserAction{Type: "evaluate", Expression: `document.querySelector("#pw").value`},
				client.BrowserAction{Type: "screenshot"},
			)
			if err != nil || !res.OK {
				t.Fatalf("actions: %+v %v", res, err)
			}
			shot := res.Results[7].Artifact
			if shot == nil {
				t.Fatalf("no screenshot artifact: %+v", res.Results[7])
			}
			// The typed password reached the page.
			if got := string(res.Results[6].Value); got != `"`+secret+secret+`"` {
				t.Fatalf("password field: %s", got)
			}
			execOK(t, c, sb.ID, "echo shell")
			if _, err := c.InterruptTrace(callCtx(t), sb.ID, "pause", "human:ann"); err != nil {
				t.Fatal(err)
			}
			_, err = c.BrowserActions(callCtx(t), sb.ID, client.BrowserAction{Type: "reload"})
			var ae *client.APIError
			if !errors.As(err, &ae) || ae.Status != 409 || ae.Problem.Code != "paused" {
				t.Fatalf("browser action while paused: %v", err)
			}
			if _, err := c.InterruptTrace(callCtx(t), sb.ID, "resume", ""); err != nil {
				t.Fatal(err)
			}
			if r, err := c.BrowserActions(callCtx(t), sb.ID, client.BrowserAction{Type: "reload"}); err != nil || !r.OK {
				t.Fatalf("browser action after resume: %+v %v", r, err)
			}

			var evs []client.TraceEvent
			if err := c.FollowTrace(callCtx(t), sb.ID, 0, false, func(ev client.TraceEvent) error {
				evs = append(evs, ev)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			var kinds []string
			raw := ""
			for _, ev := range evs {
				b, _ := json.Marshal(ev)
				raw += string(b) + "\n"
				if ev.Kind == "browser.action.started" || ev.Kind == "browser.action.finished" {
					var d struct {
						Type string `json:"type"`
					}
					_ = json.Unmarshal(ev.Data, &d)
					kinds = append(kinds, ev.Actor+" "+ev.Kind+" "+d.Type)
				} else {
					kinds = append(kinds, ev.Actor+" "+ev.Kind)
				}
			}
			if strings.Contains(strings.ToLower(raw), "hunter2") {
				t.Fatalf("the password is in the trace:\n%s", raw)
			}
			if !strings.Contains(raw, `"visible words"`) || strings.Count(raw, `"text_chars":14`) != 2 || !strings.Contains(raw, `"text_chars":21`) ||
				!strings.Contains(raw, `"id":"`+shot.ID+`"`) || !strings.Contains(raw, `"sha256":"`+shot.SHA256+`"`) ||
				!strings.Contains(raw, `"url":"http://allowed.test/form"`) {
				t.Fatalf("trace lacks the visible text, the redacted counts, the screenshot or the navigation:\n%s", raw)
			}
			// The profile's services (Chromium, the Playwright server) are
			// the system's jobs, started with the sandbox.
			want := []string{"system job.started", "system job.started"}
			for _, typ := range []string{"navigate", "evaluate", "fill", "fill", "type", "fill", "evaluate", "screenshot"} {
				want = append(want, "agent browser.action.started "+typ, "system browser.action.finished "+typ)
			}
			want = append(want, "system browser.navigation",
				"agent job.started", "system job.finished",
				"human:ann interrupt.pause", "system action.refused", "api interrupt.resume",
				"agent browser.action.started reload", "system browser.action.finished reload")
			if strings.Join(kinds, "\n") != strings.Join(want, "\n") {
				t.Fatalf("trace:\n%s\nwant:\n%s", strings.Join(kinds, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}
