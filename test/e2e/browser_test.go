package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/testenv"
)

// browserClientDir is the npm package of Playwright's own client
// (make test-deps installs it).
func browserClientDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(testenv.ModuleRoot(t), "test", "browserclient")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core", "package.json")); err != nil {
		t.Fatalf("Playwright's client is not installed (make test-deps): %v", err)
	}
	return dir
}

// playwrightDrive is the JSON line test/browserclient/drive.mjs prints.
type playwrightDrive struct {
	OK              bool   `json:"ok"`
	Error           string `json:"error"`
	Version         string `json:"version"`
	Title           string `json:"title"`
	Text            string `json:"text"`
	ScreenshotBytes int    `json:"screenshot_bytes"`
}

// drive runs Playwright's client on this machine against an endpoint of
// the service.
func drive(t *testing.T, dir, mode, endpoint, key, url string) playwrightDrive {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "drive.mjs", mode, endpoint, key, url)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, _ := cmd.Output()
	var d playwrightDrive
	if err := json.Unmarshal(bytes.TrimSpace(out), &d); err != nil {
		t.Fatalf("drive.mjs %s: %v: stdout %q stderr %q", mode, err, out, stderr.String())
	}
	return d
}

// TestBrowser drives the browser-playwright profile end to end, under each
// runtime, with Playwright's own client on this machine and the actions
// API: the sandbox reaches only the host its allowlist names.
// browserEnv is an env of the browser tests: its networked sandboxes
// reach the test's own "internet" (startInternet), extra is appended to its
// config, and the egress gateway's container is removed at the end.
func browserEnv(t *testing.T, extra string) (*env, *internet) {
	t.Helper()
	in := startInternet(t)
	secretFile := filepath.Join(t.TempDir(), "echo.secret")
	if err := os.WriteFile(secretFile, []byte("unused\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, networkConfig(in, secretFile)+extra)
	e.requireImage(t, "browser-playwright")
	t.Cleanup(func() {
		if inst := e.instance(); inst != "" {
			dockerCmdQuiet("rm", "-f", "genesis-egress-"+inst)
		}
	})
	return e, in
}

// createBrowser creates a browser-playwright sandbox under rt that reaches
// allowed.test:80, deleted when t ends; res may be nil.
func createBrowser(t *testing.T, c *client.Client, rt string, res *client.Resources) *client.Sandbox {
	t.Helper()
	req := client.CreateSandboxRequest{Profile: "browser-playwright", Runtime: rt, Resources: res,
		Network: &client.NetworkPolicy{Mode: client.NetworkAllowlist, Allow: []client.NetworkRule{{Host: "allowed.test", Ports: []int{80}}}}}
	if rt == "runc" {
		req.RiskLevel = "low" // the profile's default (high) runs under runsc only
	}
	sb, err := c.CreateSandbox(callCtx(t), req, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.DeleteSandbox(context.Background(), sb.ID) })
	return sb
}

func TestBrowser(t *testing.T) {
	t.Parallel()
	e, in := browserEnv(t, "")
	e.requireImage(t, "tool-basic")
	dir := browserClientDir(t)
	var pkg struct{ Version string }
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", "playwright-core", "package.json"))
	if err != nil || json.Unmarshal(b, &pkg) != nil {
		t.Fatalf("playwright-core's package.json: %v", err)
	}
	// What /download serves, fetched from this machine.
	resp, err := http.Get("http://" + in.allowed + "/download")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	wantSum := sha256.Sum256(want)

	svc := e.start(t)
	c := svc.client()

	// A sandbox of a profile without a browser has no browser routes.
	plain, err := c.CreateSandbox(callCtx(t), client.CreateSandboxRequest{Profile: "tool-basic"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if code, body := apiJSON(t, svc, "GET", "/v1/sandboxes/"+plain.ID+"/browser/json/version", nil, nil); code != 409 || !strings.Contains(body, "not_a_browser_profile") {
		t.Errorf("a tool-basic sandbox's browser: %d %s", code, body)
	}
	c.DeleteSandbox(callCtx(t), plain.ID)

	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := createBrowser(t, c, rt, nil)
			if sb.Runtime != rt {
				t.Fatalf("sandbox runtime %s, want %s", sb.Runtime, rt)
			}
			st, err := c.BrowserStatus(callCtx(t), sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			if st.Versions["playwright"] != pkg.Version || st.Versions["chromium"] == "" || st.PlaywrightURL == "" {
				t.Fatalf("browser status %+v; want playwright %s", st, pkg.Version)
			}
			eventually(t, 60*time.Second, "the browser ready", func() (bool, string) {
				st, err := c.BrowserStatus(callCtx(t), sb.ID)
				return err == nil && st.Ready, fmt_(st, err)
			})
			// An idle browser sandbox runs one Chromium: the Playwright
			// server, probed ready by the service, launches its own only for
			// a client that speaks.
			eventually(t, 60*time.Second, "the playwright service ready", func() (bool, string) {
				got, err := c.GetSandbox(callCtx(t), sb.ID)
				if err != nil {
					return false, err.Error()
				}
				for _, s := range got.Services {
					if s.Name == "playwright" && s.State == "ready" {
						return true, ""
					}
				}
				return false, fmt_(got.Services, nil)
			})
			if res := execOK(t, c, sb.ID, "pgrep -c -f 'remote-debugging-[p]ipe' || true"); strings.TrimSpace(res.Stdout) != "0" {
				t.Errorf("an idle browser sandbox runs the Playwright server's Chromium (%s processes)", strings.TrimSpace(res.Stdout))
			}

			// Playwright's client over CDP and over its own protocol, with
			// the API key as a header, fills and submits the form.
			for _, mode := range []string{"cdp", "pw"} {
				ep := st.CDPURL
				if mode == "pw" {
					ep = st.PlaywrightURL
				}
				d := drive(t, dir, mode, ep, e.apiKey, "http://allowed.test/form")
				if !d.OK || d.Title != "done" || d.Text != "got hello genesis" || d.ScreenshotBytes < 1000 || !strings.HasPrefix(d.Version, st.Versions["chromium"][:3]) {
					t.Errorf("Playwright %s: %+v", mode, d)
				}
			}
			// An older client is told what to install, before any upgrade.
			d := drive(t, dir, "pw-old", st.PlaywrightURL, e.apiKey, "")
			if d.OK || !strings.Contains(d.Error, "playwright_version_mismatch") || !strings.Contains(d.Error, "1.64.1") || !strings.Contains(d.Error, pkg.Version) {
				t.Errorf("an older Playwright client: %+v", d)
			}
			// A plain GET of a WebSocket-only path says so.
			for _, p := range []string{"/devtools/browser/x", "/playwright"} {
				if code, body := apiJSON(t, svc, "GET", "/v1/sandboxes/"+sb.ID+"/browser"+p, nil, nil); code != 400 || !strings.Contains(body, "websocket_required") {
					t.Errorf("a plain GET of %s: %d %s", p, code, body)
				}
			}
			// Without the key: refused; with a capability link: no key needed.
			if d := drive(t, dir, "cdp", st.CDPURL, "", ""); d.OK || !strings.Contains(d.Error, "401") {
				t.Errorf("CDP without the API key: %+v", d)
			}
			link, err := c.CreateBrowserLink(callCtx(t), sb.ID, 5*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if d := drive(t, dir, "cdp", link.CDPURL, "", "http://allowed.test/form"); !d.OK || d.Text != "got hello genesis" {
				t.Errorf("CDP through a capability link: %+v", d)
			}

			// The actions API: the same form, and a screenshot kept.
			res, err := c.BrowserActions(callCtx(t), sb.ID,
				client.BrowserAction{Type: "navigate", URL: "http://allowed.test/form"},
				client.BrowserAction{Type: "fill", Selector: "#q", Text: "from actions"},
				client.BrowserAction{Type: "click", Selector: "#go"},
				client.BrowserAction{Type: "wait", Selector: "#out"},
				client.BrowserAction{Type: "text", Selector: "#out"},
				client.BrowserAction{Type: "screenshot", FullPage: true},
			)
			if err != nil {
				t.Fatal(err)
			}
			if !res.OK || len(res.Results) != 6 || string(res.Results[4].Value) != `"got from actions"` || res.Title != "done" ||
				!strings.Contains(string(res.Results[0].Value), `"status":200`) {
				t.Fatalf("actions: %+v", res)
			}
			art := res.Results[5].Artifact
			if art == nil || art.MIME != "image/png" || art.SandboxID != sb.ID {
				t.Fatalf("screenshot artifact %+v", art)
			}
			dl, err := c.DownloadArtifact(callCtx(t), art.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(dl.Body)
			dl.Body.Close()
			if err != nil || img.Bounds().Dx() < 800 {
				t.Errorf("the screenshot artifact does not decode as a page: %v", err)
			}

			// A host outside the allowlist: the navigation fails and the
			// egress gateway records the refusal. The sandbox has a network,
			// so the error does not say it has none.
			res, err = c.BrowserActions(callCtx(t), sb.ID, client.BrowserAction{Type: "navigate", URL: "http://other.test/", TimeoutMs: 15000})
			if err != nil {
				t.Fatal(err)
			}
			if res.OK || !strings.Contains(res.Results[0].Error, "network policy refused other.test") || strings.Contains(res.Results[0].Error, "has no network") {
				t.Errorf("navigating to a host outside the allowlist: %+v", res)
			}
			eventually(t, 30*time.Second, "a denied egress event for other.test", func() (bool, string) {
				ev, err := c.NetworkEvents(callCtx(t), sb.ID, "", 1000)
				if err != nil {
					return false, err.Error()
				}
				for _, e := range ev.Items {
					if e.Name == "other.test" && e.Decision == "deny" {
						return true, ""
					}
				}
				return false, fmt_(ev.Items, nil)
			})

			// A download lands in the downloads directory, whole.
			res, err = c.BrowserActions(callCtx(t), sb.ID,
				client.BrowserAction{Type: "navigate", URL: "http://allowed.test/download-page"},
				client.BrowserAction{Type: "click", Selector: "#dl"})
			if err != nil || !res.OK {
				t.Fatalf("download click: %+v %v", res, err)
			}
			eventually(t, 30*time.Second, "report.bin downloaded", func() (bool, string) {
				l, err := c.ListFiles(callCtx(t), sb.ID, st.DownloadsDir, 1, 100)
				if err != nil {
					return false, err.Error()
				}
				for _, f := range l.Entries {
					if f.Name == "report.bin" && f.Size == int64(len(want)) {
						return true, ""
					}
				}
				return false, fmt_(l.Entries, nil)
			})
			f, err := c.ReadFile(callCtx(t), sb.ID, st.DownloadsDir+"/report.bin", nil)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(f.Body)
			f.Body.Close()
			if sum := sha256.Sum256(got); sum != wantSum {
				t.Errorf("downloaded sha256 %s, want %s", hex.EncodeToString(sum[:]), hex.EncodeToString(wantSum[:]))
			}
			// The trace has it as soon as Chromium reports it complete,
			// before anyone lists the downloads.
			wantHex := hex.EncodeToString(wantSum[:])
			eventually(t, 10*time.Second, "browser.download in the trace", func() (bool, string) {
				n := 0
				err := c.FollowTrace(callCtx(t), sb.ID, 0, false, func(ev client.TraceEvent) error {
					if ev.Kind == "browser.download" && strings.Contains(string(ev.Data), wantHex) {
						n++
					}
					return nil
				})
				return err == nil && n == 1, fmt_(n, err)
			})
			// Listed with its digest, and kept as an artifact on request.
			dls, err := c.BrowserDownloads(callCtx(t), sb.ID)
			if err != nil || len(dls.Items) != 1 || dls.Items[0].SHA256 != wantHex || dls.Items[0].Artifact != nil {
				t.Fatalf("downloads: %+v %v", dls, err)
			}
			if _, err := c.KeepBrowserDownloads(callCtx(t), sb.ID, "nope.bin"); !client.IsNotFound(err) {
				t.Errorf("keeping a download that is not there: %v", err)
			}
			kept, err := c.KeepBrowserDownloads(callCtx(t), sb.ID)
			if err != nil || len(kept.Items) != 1 || kept.Items[0].Artifact == nil || kept.Items[0].Artifact.SHA256 != wantHex {
				t.Fatalf("keeping the downloads: %+v %v", kept, err)
			}
			if _, err := c.BrowserDownloads(callCtx(t), sb.ID); err != nil {
				t.Fatal(err)
			}
			// The trace has the download once when first seen and once when
			// kept (with its artifact); listing again adds nothing.
			var dlEvents []string
			if err := c.FollowTrace(callCtx(t), sb.ID, 0, false, func(ev client.TraceEvent) error {
				if ev.Kind == "browser.download" {
					dlEvents = append(dlEvents, string(ev.Data))
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(dlEvents) != 2 || !strings.Contains(dlEvents[0], wantHex) || strings.Contains(dlEvents[0], "artifact") ||
				!strings.Contains(dlEvents[1], `"id":"`+kept.Items[0].Artifact.ID+`"`) {
				t.Errorf("download events in the trace: %q", dlEvents)
			}

			// Playwright inside the sandbox, on the sandbox's own browser;
			// its screenshot is kept as the job's artifact.
			script := `const { chromium } = require('playwright-core');
(async () => {
  const b = await chromium.connectOverCDP('http://127.0.0.1:9222');
  const p = await b.contexts()[0].newPage();
  await p.goto('http://allowed.test/form');
  await p.screenshot({ path: '/workspace/out/inside.png' });
  console.log('title=' + await p.title());
  await p.close();
  await b.close(); // disconnects; the sandbox's browser keeps running
})().catch(e => { console.error(e); process.exit(1); });`
			ex, err := c.Exec(callCtx(t), sb.ID, client.ExecRequest{
				Command:   []string{"sh", "-c", "mkdir -p /workspace/out && exec node -e \"$0\"", script},
				Artifacts: &client.ArtifactRequest{Paths: []string{"out/*.png"}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if ex.ExitCode != 0 || !strings.Contains(ex.Stdout, "title=form") {
				t.Fatalf("Playwright inside the sandbox: exit %d stdout %q stderr %q", ex.ExitCode, ex.Stdout, ex.Stderr)
			}
			eventually(t, 30*time.Second, "inside.png kept", func() (bool, string) {
				l, err := c.ListArtifacts(callCtx(t), ex.JobID)
				if err != nil {
					return false, err.Error()
				}
				return len(l.Items) == 1 && l.Items[0].Name == "inside.png" && l.Items[0].MIME == "image/png", fmt_(l, nil)
			})
			// A script can also launch a Chromium of its own.
			own := `const { chromium } = require('playwright-core');
(async () => {
  const b = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox', '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost, EXCLUDE *.localhost'] });
  const p = await b.newPage();
  await p.setContent('<title>own</title><p>mine</p>');
  console.log('own=' + await p.title() + ' ' + b.version());
  await b.close();
})().catch(e => { console.error(e); process.exit(1); });`
			ex, err = c.Exec(callCtx(t), sb.ID, client.ExecRequest{Command: []string{"node", "-e", own}})
			if err != nil || ex.ExitCode != 0 || !strings.Contains(ex.Stdout, "own=own ") {
				t.Errorf("Playwright inside launching its own Chromium: %+v %v", ex, err)
			}
			// Disconnecting Playwright inside left the browser running.
			if st, err := c.BrowserStatus(callCtx(t), sb.ID); err != nil || !st.Ready {
				t.Errorf("the browser after Playwright inside disconnected: %+v %v", st, err)
			}
		})
	}
}

// fmt_ renders a poll's last state for eventually.
func fmt_(v any, err error) string {
	if err != nil {
		return err.Error()
	}
	b, _ := json.Marshal(v)
	return string(b)
}
