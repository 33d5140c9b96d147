package e2e

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"strings"
	"testing"

	"genesis.dev/sandbox/client"
)

// TestBrowserProfile: a browser's profile (a persistent cookie and local
// storage of a page's origin) saved as an artifact from one sandbox and
// loaded into another is what the second browser then has, under runc and
// runsc. A load of an artifact that is not a saved profile is refused and
// leaves the browser as it was; another tenant's sandbox cannot load the
// profile.
func TestBrowserProfile(t *testing.T) {
	t.Parallel()
	otherKey := "gs-other-" + randomHex(t, 8)
	e, _ := browserEnv(t, "tenants:\n  other: {api_keys: [\""+otherKey+"\"]}\n")
	svc := e.start(t)
	c := svc.client()
	other := client.New(svc.url(), otherKey)

	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			create := func() *client.Sandbox { return createBrowser(t, c, rt, nil) }
			eval := func(id, expr string) string {
				t.Helper()
				res, err := c.BrowserActions(callCtx(t), id, client.BrowserAction{Type: "evaluate", Expression: expr})
				if err != nil || !res.OK || len(res.Results) != 1 {
					t.Fatalf("evaluate %s in %s: %+v %v", expr, id, res, err)
				}
				return string(res.Results[0].Value)
			}
			navigate := func(id string) {
				t.Helper()
				res, err := c.BrowserActions(callCtx(t), id, client.BrowserAction{Type: "navigate", URL: "http://allowed.test/form"})
				if err != nil || !res.OK {
					t.Fatalf("navigate in %s: %+v %v", id, res, err)
				}
			}
			const state = `document.cookie + "|" + localStorage.getItem("gs")`
			a, b := create(), create()

			navigate(a.ID)
			eval(a.ID, `document.cookie = "gs_cookie=kept; Max-Age=86400; Path=/"; localStorage.setItem("gs", "stored"); 1`)
			if got := eval(a.ID, state); got != `"gs_cookie=kept|stored"` {
				t.Fatalf("the first browser's state: %s", got)
			}
			saved, err := c.SaveBrowserProfile(callCtx(t), a.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			if saved.Artifact.Name != "browser-profile.tar.gz" || saved.Artifact.SandboxID != a.ID || saved.Artifact.Size == 0 {
				t.Fatalf("saved profile %+v", saved)
			}
			// The archive holds Chromium's cookie database and no cache.
			names := profileEntries(t, c, saved.Artifact.ID)
			if !strings.Contains(names, "Default/Cookies\n") || strings.Contains(names, "Default/Cache/") {
				t.Errorf("the saved profile's entries:\n%s", names)
			}
			// The first browser runs again after the save, its state intact.
			navigate(a.ID)
			if got := eval(a.ID, state); got != `"gs_cookie=kept|stored"` {
				t.Errorf("the first browser's state after the save: %s", got)
			}

			// The second browser has none of it until it loads the profile.
			navigate(b.ID)
			if got := eval(b.ID, state); got != `"|null"` {
				t.Fatalf("a fresh browser's state: %s", got)
			}
			// Not a saved profile: the screenshot of a page. Refused before
			// the browser is touched: the page stays open.
			shot, err := c.BrowserActions(callCtx(t), b.ID, client.BrowserAction{Type: "screenshot"})
			if err != nil || !shot.OK || shot.Results[0].Artifact == nil {
				t.Fatalf("screenshot: %+v %v", shot, err)
			}
			var p *client.APIError
			if _, err := c.LoadBrowserProfile(callCtx(t), b.ID, shot.Results[0].Artifact.ID); !errors.As(err, &p) || p.Status != 400 || p.Problem.Code != "invalid_browser_profile" {
				t.Errorf("loading a screenshot as a profile: %v", err)
			}
			if got := eval(b.ID, `location.href`); got != `"http://allowed.test/form"` {
				t.Errorf("after the refused load the page is %s", got)
			}
			if _, err := c.LoadBrowserProfile(callCtx(t), b.ID, "art_nope"); !client.IsNotFound(err) {
				t.Errorf("loading an unknown artifact: %v", err)
			}
			if _, err := other.LoadBrowserProfile(callCtx(t), b.ID, saved.Artifact.ID); !client.IsNotFound(err) {
				t.Errorf("another tenant loading into the sandbox: %v", err)
			}

			loaded, err := c.LoadBrowserProfile(callCtx(t), b.ID, saved.Artifact.ID)
			if err != nil {
				t.Fatal(err)
			}
			if loaded.Artifact.ID != saved.Artifact.ID || loaded.Entries == 0 || loaded.Bytes == 0 {
				t.Errorf("load %+v", loaded)
			}
			navigate(b.ID)
			if got := eval(b.ID, state); got != `"gs_cookie=kept|stored"` {
				t.Errorf("the second browser's state after the load: %s", got)
			}
			st, err := c.BrowserStatus(callCtx(t), b.ID)
			if err != nil || !st.Ready {
				t.Errorf("the browser after the load: %+v %v", st, err)
			}
		})
	}
}

// profileEntries lists the names in a saved profile artifact, one a line.
func profileEntries(t *testing.T, c *client.Client, id string) string {
	t.Helper()
	dl, err := c.DownloadArtifact(callCtx(t), id, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Body.Close()
	zr, err := gzip.NewReader(dl.Body)
	if err != nil {
		t.Fatalf("the saved profile is not gzip: %v", err)
	}
	tr := tar.NewReader(zr)
	var b strings.Builder
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return b.String()
		}
		if err != nil {
			t.Fatalf("the saved profile's tar: %v", err)
		}
		b.WriteString(strings.TrimPrefix(h.Name, "./") + "\n")
	}
}
