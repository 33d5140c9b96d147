package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// videoSegment is the data of a video.segment trace event.
type videoSegment struct {
	Recording  string    `json:"recording"`
	Index      int       `json:"index"`
	Start      time.Time `json:"start"`
	End        time.Time `json:"end"`
	DurationMS int64     `json:"duration_ms"`
	Artifact   struct {
		ID     string `json:"id"`
		SHA256 string `json:"sha256"`
		Size   int64  `json:"size"`
	} `json:"artifact"`
	// Kept is when the service recorded the segment (its event's time).
	Kept time.Time `json:"-"`
}

// TestTraceVideo records a desktop's display under runc and runsc while
// the screen turns from black to white (a full-screen white xterm), and
// checks that the trace's video segments are contiguous, cover the
// actions' events, and line up with them by content: a frame decoded (by
// the sandbox's own ffmpeg) at the wall-clock time of an event before the
// change is dark and one after it is bright. Then the export's player, in
// Chromium, plays the video: its time advances.
func TestTraceVideo(t *testing.T) {
	e := newEnv(t, "")
	e.requireImage(t, "desktop-vnc")
	svc := e.start(t)
	c := svc.client()
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := createDesktop(t, c, rt)
			// The display answers before the recorder starts.
			if res, err := c.ComputerActions(callCtx(t), sb.ID, client.ComputerActionsRequest{Actions: []client.ComputerAction{{Action: "cursor_position"}}}); err != nil || !res.OK {
				t.Fatalf("display: %+v %v", res, err)
			}
			if _, err := c.StartRecording(callCtx(t), sb.ID, client.RecordingRequest{FPS: 5, SegmentSeconds: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.StartRecording(callCtx(t), sb.ID, client.RecordingRequest{}); client.ErrorCode(err) != "recording_active" {
				t.Errorf("a second recording: %v, want 409 recording_active", err)
			}
			segments := func() []videoSegment { return traceSegments(t, c, sb.ID) }
			// Two segments of the black screen are kept before it changes.
			eventually(t, 30*time.Second, "two segments of the black screen", func() (bool, string) {
				n := len(segments())
				st, err := c.GetRecording(callCtx(t), sb.ID)
				return n >= 2, fmt.Sprintf("%d segments; recording %+v %v", n, st, err)
			})
			before := time.Now()
			if res, err := c.ComputerActions(callCtx(t), sb.ID, client.ComputerActionsRequest{Actions: []client.ComputerAction{
				{Action: "launch", Command: []string{"xterm", "-fa", "DejaVu Sans Mono", "-bg", "white", "-geometry", "400x200+0+0"}}}}); err != nil || !res.OK {
				t.Fatalf("launch: %+v %v", res, err)
			}
			var shown time.Time
			eventually(t, 30*time.Second, "the white window", func() (bool, string) {
				res, err := c.ComputerActions(callCtx(t), sb.ID, client.ComputerActionsRequest{Actions: []client.ComputerAction{{Action: "list_windows"}}})
				shown = time.Now()
				return err == nil && len(res.Results[0].Windows) > 0, fmt.Sprint(res, err)
			})
			// Kept segments past the frame checked after the change, then
			// stop.
			waitCovered(t, c, sb.ID, shown.Add(coveredAfter))
			rec, err := c.StopRecording(callCtx(t), sb.ID)
			if err != nil || rec.State != "stopped" || rec.Segments < 4 {
				t.Fatalf("stop: %+v %v", rec, err)
			}
			if _, err := c.StopRecording(callCtx(t), sb.ID); client.ErrorCode(err) != "not_recording" && err != nil && !strings.Contains(err.Error(), "stopped") {
				t.Logf("a second stop: %v", err)
			}
			segs := checkVideo(t, c, sb.ID, rec, before, shown, 60)

			// The export's player plays the video.
			files, dir := exportUnpacked(t, c, sb.ID)
			for _, s := range segs {
				if _, ok := files["artifacts/"+s.Artifact.ID+".mp4"]; !ok {
					t.Errorf("the export lacks segment %d (%s)", s.Index, s.Artifact.ID)
				}
			}
			var pr struct {
				OK            bool     `json:"ok"`
				Error         string   `json:"error"`
				VideoFrom     float64  `json:"video_from"`
				VideoTo       float64  `json:"video_to"`
				ConsoleErrors []string `json:"console_errors"`
			}
			runNodeJSON(t, "player.mjs", &pr, "file://"+filepath.Join(dir, "player.html"), "video", "", filepath.Join(consoleArtifacts(t, "trace-video-"+rt), "player.png"))
			if !pr.OK || len(pr.ConsoleErrors) > 0 || pr.VideoTo <= pr.VideoFrom {
				t.Errorf("player's video: %+v", pr)
			}
		})
	}
}

// coveredAfter is how far past the change the kept segments must reach
// before a test stops its recording: past the frame checkVideo decodes
// 0.6 s after the change, by a second.
const coveredAfter = 1600 * time.Millisecond

// waitCovered waits until the kept segments of a sandbox's recording
// reach past at by their own (recorded) times. It does not count segments
// kept after some moment: the service keeps a segment some time after
// ffmpeg closed it (longer on a loaded machine), so segments kept after a
// moment may all have been recorded before it; and a stop keeps the
// segment being written only if ffmpeg closes it within the stop's grace.
func waitCovered(t *testing.T, c *client.Client, sandboxID string, at time.Time) {
	t.Helper()
	eventually(t, 30*time.Second, "segments past "+at.Format(time.RFC3339Nano), func() (bool, string) {
		segs := traceSegments(t, c, sandboxID)
		if len(segs) == 0 {
			return false, "no segments"
		}
		last := segs[len(segs)-1]
		return last.End.After(at), fmt.Sprintf("%d segments, the last ends at %s", len(segs), last.End.Format(time.RFC3339Nano))
	})
}

// traceSegments are the video.segment events of a sandbox's trace.
func traceSegments(t *testing.T, c *client.Client, sandboxID string) []videoSegment {
	t.Helper()
	pg, err := c.TracePage(callCtx(t), sandboxID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []videoSegment
	for _, ev := range pg.Events {
		if ev.Kind == "video.segment" {
			var s videoSegment
			if err := json.Unmarshal(ev.Data, &s); err != nil {
				t.Fatal(err)
			}
			s.Kept = ev.Time
			out = append(out, s)
		}
	}
	return out
}

// checkVideo checks a stopped recording of a screen that turned from dark
// to bright between before and shown: its segments in the trace (as many
// as it says, contiguous, covering the change), a dark frame 0.6 s before
// and one at least bright 0.6 s after. It answers the segments.
func checkVideo(t *testing.T, c *client.Client, sandboxID string, rec *client.Recording, before, shown time.Time, bright int) []videoSegment {
	t.Helper()
	segs := traceSegments(t, c, sandboxID)
	if len(segs) != rec.Segments {
		t.Fatalf("%d segments in the trace, the recording says %d", len(segs), rec.Segments)
	}
	checkSegments(t, segs, before, shown)
	var lag time.Duration
	for _, s := range segs {
		lag = max(lag, s.Kept.Sub(s.End))
	}
	t.Logf("segments kept up to %v after they end", lag)
	if v := frameBrightness(t, c, sandboxID, segs, before.Add(-600*time.Millisecond)); v > 40 {
		t.Errorf("the frame 0.6 s before the change has brightness %d, want dark", v)
	}
	if v := frameBrightness(t, c, sandboxID, segs, shown.Add(600*time.Millisecond)); v < bright {
		t.Errorf("the frame 0.6 s after the change has brightness %d, want at least %d", v, bright)
	}
	return segs
}

// checkSegments checks that 1-second segments are numbered in order,
// contiguous to the millisecond, and cover from before to after.
func checkSegments(t *testing.T, segs []videoSegment, before, after time.Time) {
	t.Helper()
	for i, s := range segs {
		// A segment lasts its second; the last one, closed by the
		// stop, may be shorter.
		short := s.DurationMS < 500 && (i < len(segs)-1 || s.DurationMS <= 0)
		if s.Index != i || s.Artifact.ID == "" || short || s.DurationMS > 1500 {
			t.Errorf("segment %d: %+v", i, s)
		}
		if i > 0 && s.Start.Sub(segs[i-1].End).Abs() > time.Millisecond {
			t.Errorf("segment %d starts %v after segment %d ends", i, s.Start.Sub(segs[i-1].End), i-1)
		}
	}
	if !segs[0].Start.Before(before) || !segs[len(segs)-1].End.After(after) {
		t.Fatalf("the segments (%v – %v) do not cover the change (%v – %v)", segs[0].Start, segs[len(segs)-1].End, before, after)
	}
}

// frameBrightness is the mean brightness (0..255) of the video frame shown
// at the wall-clock time at: the last frame at or before it in the segment
// that covers it, decoded by ffmpeg in the sandbox sandboxID.
func frameBrightness(t *testing.T, c *client.Client, sandboxID string, segs []videoSegment, at time.Time) int {
	t.Helper()
	for _, s := range segs {
		if at.Before(s.Start) || !at.Before(s.End) {
			continue
		}
		dl, err := c.DownloadArtifact(callCtx(t), s.Artifact.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(dl.Body)
		dl.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.WriteFile(callCtx(t), sandboxID, "/workspace/probe.mp4", strings.NewReader(string(b)), client.WriteFileOptions{Size: int64(len(b))}); err != nil {
			t.Fatal(err)
		}
		off := at.Sub(s.Start).Seconds()
		// The last frame at or before the offset, averaged to one grey
		// pixel.
		r := execOK(t, c, sandboxID, fmt.Sprintf("ffmpeg -v error -i /workspace/probe.mp4 -vf \"select='lte(t\\,%.3f)',scale=1:1\" -fps_mode passthrough -f rawvideo -pix_fmt gray - | tail -c 1 | od -An -tu1", off))
		v, err := strconv.Atoi(strings.TrimSpace(r.Stdout))
		if err != nil {
			t.Fatalf("decoding the frame at %.3f s of segment %d: %+v", off, s.Index, r)
		}
		return v
	}
	var b strings.Builder
	for _, s := range segs {
		fmt.Fprintf(&b, "\n  segment %d: %s – %s (%d ms)", s.Index, s.Start.Format(time.RFC3339Nano), s.End.Format(time.RFC3339Nano), s.DurationMS)
	}
	pg, err := c.TracePage(callCtx(t), sandboxID, 0, 1000)
	if err == nil {
		for _, ev := range pg.Events {
			if ev.Kind == "video.stopped" || ev.Kind == "video.gap" {
				fmt.Fprintf(&b, "\n  %s: %s", ev.Kind, ev.Data)
			}
		}
	}
	t.Fatalf("no segment covers %v:%s", at.Format(time.RFC3339Nano), b.String())
	return 0
}

// TestTraceBrowserVideo records a headless browser's active tab (its
// screencast) under runc and runsc while the page turns from black to
// white, and checks the segments as TestTraceVideo does: contiguous,
// covering the change, and lined up with it by content.
func TestTraceBrowserVideo(t *testing.T) {
	e, _ := browserEnv(t, "")
	svc := e.start(t)
	c := svc.client()
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := createBrowser(t, c, rt, nil)
			paint := func(colour string) {
				res, err := c.BrowserActions(callCtx(t), sb.ID, client.BrowserAction{Type: "evaluate",
					Expression: `document.documentElement.style.background = "` + colour + `"; new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(1))))`})
				if err != nil || !res.OK {
					t.Fatalf("paint %s: %+v %v", colour, res, err)
				}
			}
			paint("black")
			if _, err := c.StartBrowserRecording(callCtx(t), sb.ID, client.RecordingRequest{FPS: 5, SegmentSeconds: 1}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.StartBrowserRecording(callCtx(t), sb.ID, client.RecordingRequest{}); client.ErrorCode(err) != "recording_active" {
				t.Errorf("a second recording: %v, want 409 recording_active", err)
			}
			eventually(t, 30*time.Second, "two segments of the black page", func() (bool, string) {
				n := len(traceSegments(t, c, sb.ID))
				st, err := c.GetBrowserRecording(callCtx(t), sb.ID)
				return n >= 2, fmt.Sprintf("%d segments; recording %+v %v", n, st, err)
			})
			before := time.Now()
			paint("white")
			shown := time.Now()
			waitCovered(t, c, sb.ID, shown.Add(coveredAfter))
			rec, err := c.StopBrowserRecording(callCtx(t), sb.ID)
			if err != nil || rec.State != "stopped" || rec.Source != "browser" || rec.Segments < 4 {
				t.Fatalf("stop: %+v %v", rec, err)
			}
			checkVideo(t, c, sb.ID, rec, before, shown, 200)
		})
	}
}

// exportUnpacked exports a sandbox's trace and unpacks it into a directory
// of its own, returning the archive's files by name and the directory.
func exportUnpacked(t *testing.T, c *client.Client, sandboxID string) (map[string][]byte, string) {
	t.Helper()
	rc, err := c.ExportTrace(callCtx(t), sandboxID)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "trace.tar.gz")
	b, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || os.WriteFile(file, b, 0o600) != nil {
		t.Fatalf("export of %s: %v", sandboxID, err)
	}
	files := readTarGz(t, file)
	dir := t.TempDir()
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil || os.WriteFile(p, b, 0o644) != nil {
			t.Fatalf("unpacking %s: %v", name, err)
		}
	}
	return files, dir
}

// TestTraceVideoDiskFull records a desktop whose workspace (its disk
// quota) a program fills and keeps full, under runc and runsc: ffmpeg's
// next write fails (this ffmpeg even crashes on it), the recording fails
// with video.stopped carrying the error, and the segments kept before stay.
// A recording started on the full disk fails too. The sandbox keeps
// working once the space is given back, and records again.
func TestTraceVideoDiskFull(t *testing.T) {
	e := newEnv(t, "")
	e.requireImage(t, "desktop-vnc")
	svc := e.start(t)
	c := svc.client()
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			req := client.CreateSandboxRequest{Profile: "desktop-vnc", Runtime: rt, Resources: &client.Resources{DiskMB: 32}}
			if rt == "runc" {
				req.RiskLevel = "low"
			}
			sb, err := c.CreateSandbox(callCtx(t), req, "")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.DeleteSandbox(callCtx(t), sb.ID) })
			if res, err := c.ComputerActions(callCtx(t), sb.ID, client.ComputerActionsRequest{Actions: []client.ComputerAction{{Action: "cursor_position"}}}); err != nil || !res.OK {
				t.Fatalf("display: %+v %v", res, err)
			}
			stoppedWithError := func(recID string) {
				t.Helper()
				pg, err := c.TracePage(callCtx(t), sb.ID, 0, 1000)
				if err != nil {
					t.Fatal(err)
				}
				for _, ev := range pg.Events {
					if ev.Kind == "video.stopped" && strings.Contains(string(ev.Data), `"recording":"`+recID+`"`) {
						if !strings.Contains(string(ev.Data), `"error"`) {
							t.Fatalf("video.stopped of %s has no error: %s", recID, ev.Data)
						}
						return
					}
				}
				t.Fatalf("no video.stopped of %s in the trace", recID)
			}
			if _, err := c.StartRecording(callCtx(t), sb.ID, client.RecordingRequest{FPS: 5, SegmentSeconds: 1}); err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, "a first segment", func() (bool, string) {
				n := len(traceSegments(t, c, sb.ID))
				return n >= 1, fmt.Sprintf("%d segments", n)
			})
			// The filler takes every block the moment it is free (the
			// service frees a segment's blocks once it keeps it).
			filler, err := c.StartJob(callCtx(t), sb.ID, client.ExecRequest{Command: []string{"sh", "-c",
				// Big writes first, then single blocks for the last bits
				// (gVisor leaves what a big write cannot fill).
				"while :; do cat /dev/zero >> /workspace/fill 2>/dev/null; dd if=/dev/zero bs=1024 count=1 oflag=append conv=notrunc of=/workspace/fill 2>/dev/null; done"}})
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, "the disk to be full", func() (bool, string) {
				r := execOK(t, c, sb.ID, "df -k /workspace | tail -1")
				f := strings.Fields(r.Stdout)
				return len(f) >= 4 && f[3] == "0", r.Stdout
			})
			var rec *client.Recording
			eventually(t, 30*time.Second, "the recording to fail", func() (bool, string) {
				rec, err = c.GetRecording(callCtx(t), sb.ID)
				return err == nil && rec.State != "recording", fmt.Sprintf("%+v %v; %d segments", rec, err, len(traceSegments(t, c, sb.ID)))
			})
			if rec.State != "failed" || rec.Error == "" {
				t.Fatalf("recording on a full disk: %+v, want failed with its error", rec)
			}
			stoppedWithError(rec.ID)
			segs := traceSegments(t, c, sb.ID)
			if len(segs) == 0 || len(segs) != rec.Segments {
				t.Fatalf("%d segments kept in the trace, the recording says %d", len(segs), rec.Segments)
			}
			// A recording started on the full disk fails.
			again, err := c.StartRecording(callCtx(t), sb.ID, client.RecordingRequest{FPS: 5, SegmentSeconds: 1})
			if err == nil {
				eventually(t, 30*time.Second, "the recording on the full disk to fail", func() (bool, string) {
					again, err = c.GetRecording(callCtx(t), sb.ID)
					return err == nil && again.State != "recording", fmt.Sprintf("%+v %v", again, err)
				})
				if again.State != "failed" || again.Error == "" {
					t.Fatalf("a recording started on the full disk: %+v", again)
				}
				stoppedWithError(again.ID)
			} else if client.ErrorCode(err) != "recording_failed" {
				t.Fatalf("starting a recording on the full disk: %v", err)
			}
			// The sandbox goes on: the space given back, a command runs,
			// writes, and a new recording records.
			// The filler ended (a writer still holding the file would keep
			// its blocks after the rm), the file removed, the space back.
			if _, err := c.CancelJob(callCtx(t), filler.ID); err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, "the filler to end", func() (bool, string) {
				j, err := c.GetJob(callCtx(t), filler.ID)
				return err == nil && j.FinishedAt != nil, fmt.Sprintf("%+v %v", j, err)
			})
			if r := execOK(t, c, sb.ID, "rm -f /workspace/fill && echo ok > /workspace/after && cat /workspace/after"); r.Stdout != "ok\n" {
				t.Fatalf("writing after the space was given back: %+v", r)
			}
			eventually(t, 30*time.Second, "free space in the workspace", func() (bool, string) {
				r := execOK(t, c, sb.ID, "df -k /workspace | tail -1")
				f := strings.Fields(r.Stdout)
				free, _ := strconv.Atoi(f[min(3, len(f)-1)])
				return len(f) >= 4 && free > 8<<10, r.Stdout
			})
			n1 := len(traceSegments(t, c, sb.ID))
			if _, err := c.StartRecording(callCtx(t), sb.ID, client.RecordingRequest{FPS: 5, SegmentSeconds: 1}); err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, "a segment of the new recording", func() (bool, string) {
				n := len(traceSegments(t, c, sb.ID))
				rec, err := c.GetRecording(callCtx(t), sb.ID)
				return n > n1, fmt.Sprintf("%d segments; recording %+v %v", n, rec, err)
			})
			if r, err := c.StopRecording(callCtx(t), sb.ID); err != nil || r.State != "stopped" {
				t.Fatalf("stop: %+v %v", r, err)
			}
		})
	}
}
