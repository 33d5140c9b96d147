package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// TestTraceDesktop is a desktop session under runc and runsc — an
// agent's computer actions in a logical display scaled to the real one, a
// shell job, a person taking over in the live view and typing a password,
// the agent refused while they hold control, the release when they leave,
// a pause — and checks that it makes one ordered trace: each action with
// its logical and physical point, a screenshot (and thumbnail) kept after
// each input action, the person's input coalesced with the password as a
// count only, the control changes and the refusals; and that the export
// carries every screenshot with matching sha256s. (Not t.Parallel: its
// screenshots and the player's 4× playback are timed on a real display.)
func TestTraceDesktop(t *testing.T) {
	e := newEnv(t, "")
	e.requireImage(t, "desktop-vnc")
	svc := e.start(t)
	c := svc.client()
	const secret = "hunter2-Secret"
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := createDesktop(t, c, rt)
			logical := &client.DisplaySize{Width: 1024, Height: 640} // the real one is 1280x800
			act := func(a ...client.ComputerAction) (*client.ComputerActionsResult, error) {
				return c.ComputerActions(callCtx(t), sb.ID, client.ComputerActionsRequest{Actions: a, Display: logical})
			}
			if res, err := act(client.ComputerAction{Action: "launch", Command: []string{"xterm", "-fa", "DejaVu Sans Mono", "-fs", "12", "-geometry", "80x20+0+0"}}); err != nil || !res.OK {
				t.Fatalf("launch: %+v %v", res, err)
			}
			var win client.ComputerWindow
			eventually(t, 30*time.Second, "the xterm window", func() (bool, string) {
				res, err := act(client.ComputerAction{Action: "list_windows"})
				if err != nil || len(res.Results[0].Windows) == 0 {
					return false, fmt.Sprint(res, err)
				}
				win = res.Results[0].Windows[0]
				return true, ""
			})
			execOK(t, c, sb.ID, "echo shell")
			cx, cy := win.X+win.Width/2, win.Y+win.Height/2
			if res, err := act(client.ComputerAction{Action: "left_click", Coordinate: []int{cx, cy}},
				client.ComputerAction{Action: "type", Text: "echo agent\n"},
				client.ComputerAction{Action: "type", Text: "marked " + secret, Sensitive: true},
				client.ComputerAction{Action: "key", Text: "ctrl+u"}); err != nil || !res.OK {
				t.Fatalf("click and type: %+v %v", res, err)
			}

			// A person takes over in the live view: their input makes them
			// the holder; the agent's next action is refused at once.
			conn, err := c.DialDisplayVNCAs(callCtx(t), sb.ID, "controller", "alice")
			if err != nil {
				t.Fatal(err)
			}
			human := handshakeRFB(t, conn, "controller")
			human.typeText(secret + "\n")
			eventually(t, 20*time.Second, "the person holds control", func() (bool, string) {
				st, err := c.DesktopControl(callCtx(t), sb.ID, -1, 0)
				return err == nil && st.Holder == "human:alice", fmt.Sprint(st, err)
			})
			// Their input is recorded (the Return ends the run of typing)
			// before the agent tries again, so the trace's order is fixed.
			eventually(t, 20*time.Second, "the person's input in the trace", func() (bool, string) {
				pg, err := c.TracePage(callCtx(t), sb.ID, 0, 1000)
				if err != nil {
					return false, err.Error()
				}
				for _, ev := range pg.Events {
					if ev.Kind == "human.input" && strings.Contains(string(ev.Data), `"key":"Return"`) {
						return true, ""
					}
				}
				return false, fmt.Sprintf("%d events", len(pg.Events))
			})
			_, err = act(client.ComputerAction{Action: "left_click", Coordinate: []int{cx, cy}})
			var ae *client.APIError
			if !errors.As(err, &ae) || ae.Status != 409 || ae.Problem.Code != "control_held" {
				t.Fatalf("agent click while a person holds control: %v", err)
			}
			conn.Close()
			eventually(t, 20*time.Second, "control released when the view closed", func() (bool, string) {
				st, err := c.DesktopControl(callCtx(t), sb.ID, -1, 0)
				return err == nil && st.Holder == "", fmt.Sprint(st, err)
			})
			if _, err := c.InterruptTrace(callCtx(t), sb.ID, "pause", "human:ann"); err != nil {
				t.Fatal(err)
			}
			if _, err := act(client.ComputerAction{Action: "screenshot"}); !errors.As(err, &ae) || ae.Status != 409 || ae.Problem.Code != "paused" {
				t.Fatalf("agent action while paused: %v", err)
			}
			if _, err := c.InterruptTrace(callCtx(t), sb.ID, "resume", ""); err != nil {
				t.Fatal(err)
			}
			if res, err := act(client.ComputerAction{Action: "mouse_move", Coordinate: []int{10, 10}}); err != nil || !res.OK {
				t.Fatalf("agent action after the release: %+v %v", res, err)
			}

			// Every input action's screenshot is kept (in the background):
			// left_click, two types, key and mouse_move.
			var evs []client.TraceEvent
			eventually(t, 30*time.Second, "the screenshots of five input actions", func() (bool, string) {
				evs = nil
				err := c.FollowTrace(callCtx(t), sb.ID, 0, false, func(ev client.TraceEvent) error {
					evs = append(evs, ev)
					return nil
				})
				n := 0
				for _, ev := range evs {
					if ev.Kind == "computer.screenshot" {
						n++
					}
				}
				return err == nil && n == 5, fmt.Sprintf("%d screenshots, %v", n, err)
			})
			raw := ""
			var kinds []string
			var shots []json.RawMessage
			agentJobs := map[string]bool{}
			for i, ev := range evs {
				if ev.Seq != int64(i+1) {
					t.Fatalf("event %d has seq %d", i, ev.Seq)
				}
				b, _ := json.Marshal(ev)
				raw += string(b) + "\n"
				var d struct {
					Action string `json:"action"`
					Type   string `json:"type"`
					JobID  string `json:"job_id"`
				}
				_ = json.Unmarshal(ev.Data, &d)
				switch {
				case ev.Kind == "computer.screenshot":
					shots = append(shots, ev.Data)
					continue
				case ev.Kind == "job.started" && ev.Actor == "agent":
					agentJobs[d.JobID] = true
				case ev.Kind == "job.started" || (ev.Kind == "job.finished" && !agentJobs[d.JobID]):
					continue // the display's services
				case d.Action == "list_windows":
					continue // polled until the window came
				}
				k := ev.Actor + " " + ev.Kind
				if d.Action != "" {
					k += " " + d.Action
				}
				if d.Type != "" {
					k += " " + d.Type
				}
				kinds = append(kinds, k)
			}
			if strings.Contains(strings.ToLower(raw), "hunter2") {
				t.Fatalf("the password is in the trace:\n%s", raw)
			}
			want := []string{
				"agent computer.action.started launch", "system computer.action.finished launch",
				"agent job.started", "system job.finished",
				"agent computer.action.started left_click", "system computer.action.finished left_click",
				"agent computer.action.started type", "system computer.action.finished type",
				"agent computer.action.started type", "system computer.action.finished type",
				"agent computer.action.started key", "system computer.action.finished key",
				"human:alice control.taken", "human:alice human.input type", "human:alice human.input key",
				"system action.refused computer.actions",
				"human:alice control.released",
				"human:ann interrupt.pause", "system action.refused computer.actions", "api interrupt.resume",
				"agent computer.action.started mouse_move", "system computer.action.finished mouse_move",
			}
			if strings.Join(kinds, "\n") != strings.Join(want, "\n") {
				t.Fatalf("trace:\n%s\nwant:\n%s\nraw:\n%s", strings.Join(kinds, "\n"), strings.Join(want, "\n"), raw)
			}
			// The click's point, logical and physical (x1.25); the typed
			// text, the sensitive one as a count; the person's typing as a
			// count and their Return as a key.
			px, py := (cx*1280+512)/1024, (cy*800+320)/640
			for _, s := range []string{
				fmt.Sprintf(`"logical":{"x":%d,"y":%d},"physical":{"x":%d,"y":%d}`, cx, cy, px, py),
				`"text":"echo agent\n"`, `"redacted":true`, fmt.Sprintf(`"text_chars":%d`, len("marked "+secret)),
				fmt.Sprintf(`"chars":%d,"type":"type"`, len(secret)), `"key":"Return","type":"key"`,
				`"state":"control_held"`, `"via":"live_view"`,
			} {
				if !strings.Contains(raw, s) {
					t.Errorf("trace lacks %s:\n%s", s, raw)
				}
			}
			arts := map[string]string{} // id → sha256
			for _, s := range shots {
				var d struct {
					Phase     string `json:"phase"`
					Artifact  struct{ ID, SHA256 string }
					Thumbnail struct{ ID, SHA256 string }
				}
				if err := json.Unmarshal(s, &d); err != nil || d.Phase != "after" || d.Artifact.ID == "" || d.Thumbnail.ID == "" {
					t.Fatalf("screenshot event %s: %v", s, err)
				}
				arts[d.Artifact.ID], arts[d.Thumbnail.ID] = d.Artifact.SHA256, d.Thumbnail.SHA256
			}

			// The export carries the events and every screenshot.
			files, dir := exportUnpacked(t, c, sb.ID)
			var man struct {
				Files []struct {
					Path, SHA256 string
					ArtifactID   string `json:"artifact_id"`
				} `json:"files"`
			}
			if err := json.Unmarshal(files["manifest.json"], &man); err != nil {
				t.Fatal(err)
			}
			got := 0
			for _, f := range man.Files {
				sum := sha256.Sum256(files[f.Path])
				if hex.EncodeToString(sum[:]) != f.SHA256 {
					t.Errorf("export: %s's sha256 is not the manifest's", f.Path)
				}
				if f.ArtifactID == "" {
					continue
				}
				if arts[f.ArtifactID] != f.SHA256 {
					t.Errorf("export: artifact %s is not a screenshot of the trace", f.ArtifactID)
				}
				img, err := png.Decode(bytes.NewReader(files[f.Path]))
				if err != nil || (img.Bounds().Dx() != 1280 && img.Bounds().Dx() != 320) {
					t.Errorf("export: %s is not a 1280 or 320 px wide PNG: %v", f.Path, err)
				}
				got++
			}
			if got != len(arts) {
				t.Errorf("export has %d screenshots, the trace names %d", got, len(arts))
			}

			// The export's player, opened offline from the unpacked archive
			// in Chromium: every event in the timeline, the filter by actor,
			// a screenshot shown, playback moving forward.
			if _, ok := files["player.html"]; !ok {
				t.Fatal("the export has no player.html")
			}
			var shotSeq int64
			humans := 0
			for _, ev := range evs {
				if ev.Kind == "computer.screenshot" && shotSeq == 0 {
					shotSeq = ev.Seq
				}
				if ev.Actor == "human:alice" {
					humans++
				}
			}
			var pr struct {
				OK             bool     `json:"ok"`
				Error          string   `json:"error"`
				Items          int      `json:"items"`
				Filtered       int      `json:"filtered"`
				FilteredActors []string `json:"filtered_actors"`
				ShotWidth      int      `json:"shot_width"`
				PlayedFrom     int64    `json:"played_from"`
				PlayedTo       int64    `json:"played_to"`
				Paused         string   `json:"playing_after_pause"`
				ConsoleErrors  []string `json:"console_errors"`
			}
			runNodeJSON(t, "player.mjs", &pr, "file://"+filepath.Join(dir, "player.html"), "human:alice", fmt.Sprint(shotSeq),
				filepath.Join(consoleArtifacts(t, "trace-player-"+rt), "player.png"))
			if !pr.OK || len(pr.ConsoleErrors) > 0 {
				t.Fatalf("player: %s %q", pr.Error, pr.ConsoleErrors)
			}
			lines := strings.Count(string(files["events.jsonl"]), "\n")
			if pr.Items != lines || pr.Filtered != humans || len(pr.FilteredActors) != 1 || pr.ShotWidth != 1280 ||
				pr.PlayedTo <= pr.PlayedFrom || pr.Paused != "false" {
				t.Errorf("player: %+v; want %d items, %d of human:alice, a 1280 px screenshot, playback forward then paused", pr, lines, humans)
			}
		})
	}
}

// TestTraceSSEDisconnects reads a trace over SSE while events are being
// appended, dropping the connection after a random number of bytes (mid
// event as often as not) and resuming from the last complete event, by
// Last-Event-ID and by ?cursor= in turn: every event arrives exactly once
// and in order.
func TestTraceSSEDisconnects(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: e.runtimes(t)[0], RiskLevel: "low"})
	const n = 400
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			d, _ := json.Marshal(map[string]any{"text": strings.Repeat("x", i%97), "i": i})
			if _, err := c.PostTraceEvent(context.Background(), sb.ID, client.TraceEventRequest{Kind: "annotation", Data: d}); err != nil {
				t.Errorf("post %d: %v", i, err)
				return
			}
		}
	}()
	rng := rand.New(rand.NewPCG(1, 2))
	var last int64
	seen := 0
	deadline := time.Now().Add(2 * time.Minute)
	for conn := 0; last < n; conn++ {
		if time.Now().After(deadline) {
			t.Fatalf("after %d connections, %d of %d events", conn, last, n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		u := svc.url() + "/v1/sandboxes/" + sb.ID + "/trace"
		if conn%2 == 1 {
			u += "?cursor=" + strconv.FormatInt(last, 10)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		req.Header.Set("Authorization", "Bearer "+svc.e.apiKey)
		if conn%2 == 0 && last > 0 {
			req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			cancel()
			t.Fatalf("GET trace (cursor %d): %d %s", last, resp.StatusCode, b)
		}
		r := newSSEReader(&cutReader{r: resp.Body, left: 1 + rng.Int64N(3000)})
		for {
			it, err := r.next()
			if err != nil {
				if !errors.Is(err, errCut) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("connection %d: %v", conn, err)
				}
				break
			}
			if it.isComment() {
				continue
			}
			seq, _ := strconv.ParseInt(it.ID, 10, 64)
			var ev client.TraceEvent
			if it.Event != "trace" || json.Unmarshal([]byte(it.Data), &ev) != nil || ev.Seq != seq {
				t.Fatalf("connection %d: event %+v", conn, it)
			}
			if seq != last+1 {
				t.Fatalf("connection %d: seq %d after %d (a gap or a duplicate)", conn, seq, last)
			}
			var d struct{ I int }
			if json.Unmarshal(ev.Data, &d) != nil || d.I != int(seq-1) {
				t.Fatalf("event %d carries %s", seq, ev.Data)
			}
			last = seq
			seen++
			if last == n {
				break
			}
		}
		resp.Body.Close()
		cancel()
	}
	wg.Wait()
	if seen != n {
		t.Fatalf("%d events delivered, want %d", seen, n)
	}
}
