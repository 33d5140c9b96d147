package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// TestRecordingEndsCleanlyOnSIGTERM: a desktop recording in progress when
// the service gets SIGTERM, under runc and runsc, ends as a stop ends it
// before the drain destroys its sandbox: ffmpeg closes the segment it was
// writing, the service keeps it, and video.stopped says the service was
// stopping. The segment lasts 60 s, so none was closed before: everything
// the recording holds is that last segment. After a restart on the same
// data dir the trace has it, its artifact is whole (size and SHA-256), and
// ffmpeg in a new sandbox decodes it without an error into as many frames
// as its duration holds.
func TestRecordingEndsCleanlyOnSIGTERM(t *testing.T) {
	e := newEnv(t, "")
	e.requireImage(t, "desktop-vnc")
	svc := e.start(t)
	c := svc.client()
	const fps = 5
	type recorded struct {
		rt  string
		sb  *client.Sandbox
		rec *client.Recording
	}
	desktop := func(rt string) *client.Sandbox {
		req := client.CreateSandboxRequest{Profile: "desktop-vnc", Runtime: rt}
		if rt == "runc" {
			req.RiskLevel = "low" // the profile's default (high) runs under runsc only
		}
		return e.createSandbox(t, req)
	}
	var recs []recorded
	for _, rt := range e.runtimes(t) {
		sb := desktop(rt)
		if res, err := c.ComputerActions(callCtx(t), sb.ID, client.ComputerActionsRequest{Actions: []client.ComputerAction{{Action: "cursor_position"}}}); err != nil || !res.OK {
			t.Fatalf("%s: display: %+v %v", rt, res, err)
		}
		rec, err := c.StartRecording(callCtx(t), sb.ID, client.RecordingRequest{FPS: fps, SegmentSeconds: 60})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, recorded{rt, sb, rec})
	}
	// ffmpeg has encoded three seconds of each display (its progress in its
	// log), all of it in the first segment, so nothing is kept yet.
	for _, r := range recs {
		eventually(t, time.Minute, r.rt+": ffmpeg to encode 15 frames", func() (bool, string) {
			res := execOK(t, c, r.sb.ID, "tr '\\r' '\\n' < /workspace/.genesis-recordings/"+r.rec.ID+"/ffmpeg.log | grep -o 'frame= *[0-9]*' | tail -n 1 | tr -dc 0-9")
			n, _ := strconv.Atoi(strings.TrimSpace(res.Stdout))
			return n >= 3*fps, fmt.Sprintf("frame %q (%s)", res.Stdout, res.Stderr)
		})
		if segs := traceSegments(t, c, r.sb.ID); len(segs) != 0 {
			t.Fatalf("%s: %d segments kept before the stop, want none (60 s segments)", r.rt, len(segs))
		}
	}

	if err := svc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-svc.done:
	case <-time.After(stopTimeout):
		t.Fatalf("the service did not exit within %v of SIGTERM", stopTimeout)
	}
	if !strings.Contains(svc.log.String(), "drained") {
		t.Errorf("the service's log does not tell of the drain:\n%s", svc.log.String())
	}

	svc = e.start(t)
	c = svc.client()
	dec := desktop(recs[0].rt) // decodes the segments with its ffmpeg
	for _, r := range recs {
		if sb, err := c.GetSandbox(callCtx(t), r.sb.ID); err != nil || sb.State != "destroyed" {
			t.Errorf("%s: sandbox after the drain: %+v %v, want destroyed", r.rt, sb, err)
		}
		stopped := traceEvents(t, c, r.sb.ID, "video.stopped")
		if len(stopped) != 1 || stopped[0]["recording"] != r.rec.ID || stopped[0]["reason"] != "the service is stopping" ||
			stopped[0]["segments"] != float64(1) || stopped[0]["error"] != nil {
			t.Errorf("%s: video.stopped %v, want one of %s: the service is stopping, 1 segment, no error", r.rt, stopped, r.rec.ID)
		}
		segs := traceSegments(t, c, r.sb.ID)
		if len(segs) != 1 {
			t.Fatalf("%s: %d segments kept, want the one being written at SIGTERM", r.rt, len(segs))
		}
		s := segs[0]
		if s.Recording != r.rec.ID || s.Index != 0 || s.DurationMS < 2800 || s.DurationMS > 60_000 || !s.End.After(s.Start) {
			t.Errorf("%s: segment %+v, want recording %s's first, of about the 3 s or more encoded (15 frames; offsets round)", r.rt, s, r.rec.ID)
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
		sum := sha256.Sum256(b)
		if int64(len(b)) != s.Artifact.Size || hex.EncodeToString(sum[:]) != s.Artifact.SHA256 {
			t.Errorf("%s: the segment's artifact is %d bytes (sha256 %x), the trace says %d (%s)", r.rt, len(b), sum, s.Artifact.Size, s.Artifact.SHA256)
		}
		// The file is a whole MP4: ffmpeg decodes every frame of it
		// without an error.
		file := "/workspace/" + r.rt + ".mp4"
		if _, err := c.WriteFile(callCtx(t), dec.ID, file, bytes.NewReader(b), client.WriteFileOptions{Size: int64(len(b))}); err != nil {
			t.Fatal(err)
		}
		res := execOK(t, c, dec.ID, "ffmpeg -v error -xerror -i "+file+" -map 0:v -f framemd5 - | grep -vc '^#'")
		frames, _ := strconv.Atoi(strings.TrimSpace(res.Stdout))
		want := int(s.DurationMS) * fps / 1000
		if res.Stderr != "" || frames < 3*fps-1 || frames < want-2 {
			t.Errorf("%s: decoding the segment (%d ms): %d frames, want about %d; stderr %q", r.rt, s.DurationMS, frames, want, res.Stderr)
		}
		t.Logf("%s: the segment being written at SIGTERM was kept: %d ms, %d bytes, %d frames decoded", r.rt, s.DurationMS, len(b), frames)
	}
}

// traceEvents are the data of a sandbox's trace events of one kind.
func traceEvents(t *testing.T, c *client.Client, sandboxID, kind string) []map[string]any {
	t.Helper()
	pg, err := c.TracePage(callCtx(t), sandboxID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, ev := range pg.Events {
		if ev.Kind == kind {
			var d map[string]any
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
	}
	return out
}
