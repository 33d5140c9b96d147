package e2e

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// TestTraceBrowser drives a browser session (navigate, fill a text field,
// fill and type into a password field, a sensitive action, a kept
// screenshot) and a shell job in one sandbox under runc and runsc, and
// checks they make one ordered trace with the password never recorded
// (its length is), the screenshot's artifact referenced, and that a paused
// sandbox's next browser action answers 409 paused until resume. Every
// action that changes the page has a screenshot after it (the default
// mode), kept with a thumbnail, the click's point marked, and exported.
func TestTraceBrowser(t *testing.T) {
	t.Parallel()
	e, _ := browserEnv(t, "")
	svc := e.start(t)
	c := svc.client()
	const secret = "hunter2-Secret"
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := createBrowser(t, c, rt, nil)
			res, err := c.BrowserActions(callCtx(t), sb.ID,
				client.BrowserAction{Type: "navigate", URL: "http://allowed.test/form"},
				client.BrowserAction{Type: "click", Selector: "#q"},
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
			shot := res.Results[8].Artifact
			if shot == nil {
				t.Fatalf("no screenshot artifact: %+v", res.Results[8])
			}
			// The typed password reached the page.
			if got := string(res.Results[7].Value); got != `"`+secret+secret+`"` {
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

			// The screenshots are kept in the background: wait for the
			// seven (navigate, click, fill ×3, type, reload).
			var evs []client.TraceEvent
			var shots []browserShot
			eventually(t, 30*time.Second, "seven screenshots in the trace", func() (bool, string) {
				evs, shots = nil, nil
				if err := c.FollowTrace(callCtx(t), sb.ID, 0, false, func(ev client.TraceEvent) error {
					evs = append(evs, ev)
					if ev.Kind == "browser.screenshot" {
						var s browserShot
						if err := json.Unmarshal(ev.Data, &s); err != nil {
							return err
						}
						shots = append(shots, s)
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				return len(shots) >= 7, fmt.Sprintf("%d screenshots", len(shots))
			})
			wantShots := []string{"navigate", "click", "fill", "fill", "type", "fill", "reload"}
			if len(shots) != len(wantShots) {
				t.Fatalf("%d screenshots, want %d: %+v", len(shots), len(wantShots), shots)
			}
			for i, s := range shots {
				if s.Type != wantShots[i] || s.Phase != "after" || s.Error != "" || s.Artifact.ID == "" || s.Thumbnail.ID == "" || s.Size.Width < 100 {
					t.Errorf("screenshot %d: %+v, want after %s with a thumbnail", i, s, wantShots[i])
				}
			}
			// The click's point is marked: inside the image, on the field.
			if p := shots[1].Physical; p == nil || p.X <= 0 || p.Y <= 0 || p.X >= shots[1].Size.Width || p.Y >= shots[1].Size.Height {
				t.Errorf("the click's screenshot marks no point in the image: %+v", shots[1])
			}
			// The thumbnail is 320 pixels wide.
			if dl, err := c.DownloadArtifact(callCtx(t), shots[0].Thumbnail.ID, nil); err != nil {
				t.Fatal(err)
			} else {
				cfg, err := png.DecodeConfig(dl.Body)
				dl.Body.Close()
				if err != nil || cfg.Width != 320 {
					t.Errorf("thumbnail: %+v %v", cfg, err)
				}
			}
			var kinds []string
			raw := ""
			for _, ev := range evs {
				b, _ := json.Marshal(ev) // the server's encoding: same fields, same order
				raw += string(b) + "\n"
				if ev.Kind == "browser.screenshot" {
					continue // kept in the background: their place varies
				}
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
			for _, typ := range []string{"navigate", "click", "evaluate", "fill", "fill", "type", "fill", "evaluate", "screenshot"} {
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
			// Files: events, player, the kept screenshot, and the trace's
			// screenshots with their thumbnails.
			if man.Events != lines || lines != len(evs)+2 || len(man.Files) != 3+2*len(shots) || files["player.html"] == nil || !strings.HasPrefix(string(files["events.jsonl"]), raw) {
				t.Fatalf("export: manifest %+v, events.jsonl %d lines, want %d then the services' ends", man, lines, len(evs))
			}
			for _, f := range man.Files {
				sum := sha256.Sum256(files[f.Path])
				if hex.EncodeToString(sum[:]) != f.SHA256 {
					t.Errorf("export: %s's sha256 is not the manifest's", f.Path)
				}
				if f.ArtifactID == shot.ID && f.SHA256 != shot.SHA256 {
					t.Errorf("export: artifact %+v, want the screenshot's sha256 %s", f, shot.SHA256)
				}
			}
			if strings.Contains(strings.ToLower(string(files["events.jsonl"])), "hunter2") {
				t.Error("the password is in the export")
			}
		})
	}
}

// browserShot is the data of a browser.screenshot trace event.
type browserShot struct {
	Index    int    `json:"index"`
	Type     string `json:"type"`
	Phase    string `json:"phase"`
	Error    string `json:"error"`
	Physical *struct {
		X int `json:"x"`
		Y int `json:"y"`
	} `json:"physical"`
	Size struct {
		Width  int `json:"width"`
		Height int `json:"height"`
	} `json:"size"`
	Artifact  struct{ ID string } `json:"artifact"`
	Thumbnail struct{ ID string } `json:"thumbnail"`
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
