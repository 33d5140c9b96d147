package browser

import (
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/config"
)

func TestRewriteDevtoolsURLs(t *testing.T) {
	t.Parallel()
	body := `{"webSocketDebuggerUrl": "ws://127.0.0.1:9222/devtools/browser/abc", "devtoolsFrontendUrl": "/x?ws=127.0.0.1:9222/devtools/page/P1"}`
	br := Request{WSBase: "wss://svc.example:8443", Prefix: "/v1/sandboxes/sbx_1/browser"}
	got := string(rewriteDevtoolsURLs([]byte(body), "127.0.0.1:9222", br))
	for _, want := range []string{`"ws://`, `wss://svc.example:8443/v1/sandboxes/sbx_1/browser/devtools/browser/abc"`, `ws=svc.example:8443/v1/sandboxes/sbx_1/browser/devtools/page/P1`} {
		if want == `"ws://` {
			if strings.Contains(got, want) {
				t.Errorf("a Chromium-internal address is left: %s", got)
			}
			continue
		}
		if !strings.Contains(got, want) {
			t.Errorf("rewritten = %s; want it to contain %s", got, want)
		}
	}
	br.Query = "token=T"
	got = string(rewriteDevtoolsURLs([]byte(body), "127.0.0.1:9222", br))
	if !strings.Contains(got, `/devtools/browser/abc?token=T"`) {
		t.Errorf("the token is not carried: %s", got)
	}
}

func TestPlaywrightVersions(t *testing.T) {
	t.Parallel()
	v, ok := playwrightClientVersion("Playwright/1.64.1 (x64; debian 13) node/20.19")
	if !ok || v != "1.64.1" {
		t.Errorf("client version = %q %v", v, ok)
	}
	if _, ok := playwrightClientVersion("curl/8.0"); ok {
		t.Error("a non-Playwright agent has a version")
	}
	if !sameMinor("1.65.1", "1.65.0") || sameMinor("1.64.1", "1.65.1") || sameMinor("2.65.1", "1.65.1") {
		t.Error("sameMinor compares more or less than major.minor")
	}
}

func TestValidateActions(t *testing.T) {
	t.Parallel()
	tgt := &Target{Spec: config.BrowserSpec{MaxActions: 3, ActionTimeout: time.Second, MaxActionTimeout: 5 * time.Second}}
	one := func(a api.BrowserAction) *api.BrowserActionsRequest {
		return &api.BrowserActionsRequest{Actions: []api.BrowserAction{a}}
	}
	x := 1.0
	for name, req := range map[string]*api.BrowserActionsRequest{
		"none":             {},
		"too many":         {Actions: make([]api.BrowserAction, 4)},
		"unknown type":     one(api.BrowserAction{Type: "teleport"}),
		"file url":         one(api.BrowserAction{Type: "navigate", URL: "file:///etc/passwd"}),
		"javascript url":   one(api.BrowserAction{Type: "navigate", URL: "javascript:alert(1)"}),
		"click nowhere":    one(api.BrowserAction{Type: "click", X: &x}),
		"fill no selector": one(api.BrowserAction{Type: "fill", Text: "a"}),
		"bad key":          one(api.BrowserAction{Type: "press", Key: "Hyper"}),
		"long wait":        one(api.BrowserAction{Type: "wait", Ms: 6000}),
		"timeout":          one(api.BrowserAction{Type: "click", Selector: "a", TimeoutMs: 6000}),
		"format":           one(api.BrowserAction{Type: "screenshot", Format: "gif"}),
		"name":             one(api.BrowserAction{Type: "screenshot", Name: "../x.png"}),
		"upload no files":  one(api.BrowserAction{Type: "upload", Selector: "input"}),
	} {
		if err := validate(req, tgt); err == nil {
			t.Errorf("%s: validate accepted %+v", name, req)
		}
	}
	ok := &api.BrowserActionsRequest{Actions: []api.BrowserAction{{Type: "navigate", URL: "https://example.com/"}, {Type: "click", X: &x, Y: &x}, {Type: "press", Key: "Enter"}}}
	if err := validate(ok, tgt); err != nil {
		t.Errorf("valid actions refused: %v", err)
	}
}
