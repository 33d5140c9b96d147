package e2e

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
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
				b, _ := json.Marshal(ev) // the server's encoding: same fields, same order
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

			// The export, by the CLI, after the sandbox is gone: the events,
			// the screenshot, and a manifest whose sha256s match.
			if err := c.DeleteSandbox(callCtx(t), sb.ID); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "trace.tar.gz")
			if r := svc.cli(t, "trace", "export", sb.ID, file); r.code != 0 {
				t.Fatalf("genesis trace export: %s", r)
			}
			files := readTarGz(t, file)
			var man struct {
				Events int `json:"events"`
				Files  []struct {
					Path       string `json:"path"`
					SHA256     string `json:"sha256"`
					ArtifactID string `json:"artifact_id"`
				} `json:"files"`
			}
			if err := json.Unmarshal(files["manifest.json"], &man); err != nil {
				t.Fatalf("manifest: %v (files %d)", err, len(files))
			}
			// The delete ended the profile's services: their job.finished
			// events follow the ones read above.
			lines := strings.Count(string(files["events.jsonl"]), "\n")
			if man.Events != lines || lines != len(evs)+2 || len(man.Files) != 3 || files["player.html"] == nil || !strings.HasPrefix(string(files["events.jsonl"]), raw) {
				t.Fatalf("export: manifest %+v, events.jsonl %d lines, want %d then the services' ends", man, lines, len(evs))
			}
			for _, f := range man.Files {
				sum := sha256.Sum256(files[f.Path])
				if hex.EncodeToString(sum[:]) != f.SHA256 {
					t.Errorf("export: %s's sha256 is not the manifest's", f.Path)
				}
				if f.ArtifactID != "" && (f.ArtifactID != shot.ID || f.SHA256 != shot.SHA256) {
					t.Errorf("export: artifact %+v, want the screenshot %s", f, shot.ID)
				}
			}
			if strings.Contains(strings.ToLower(string(files["events.jsonl"])), "hunter2") {
				t.Error("the password is in the export")
			}
		})
	}
}

// readTarGz returns the regular files of a tar.gz by name.
func readTarGz(t *testing.T, file string) map[string][]byte {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = b
	}
}
