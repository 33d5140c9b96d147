package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// artifactConfig caps artifacts low enough that a test can exceed them.
const artifactConfig = `
intervals: {reconcile: 1s}
limits: {artifacts: {max_file_bytes: 65536, max_total_bytes: 1048576, max_files: 100}}
`

// artifactScript writes the files of the artifact tests; tag makes their
// content unique per runtime (so blobs of parallel subtests do not mix).
// It exits 3: artifacts are kept whatever the exit.
const artifactScript = `set -e
cd /workspace
mkdir -p out report/sub
printf '\211PNG\r\n\032\n%s-image' "$TAG" > out/a.png
cp out/a.png out/b.png
printf '%s report\n' "$TAG" > report/sub/r.txt
printf 'plain %s text\n' "$TAG" > data
head -c 100000 /dev/zero > out/big.png
ln -s /etc/passwd out/link.png
mkdir -p out/dir.png
exit 3
`

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestArtifacts covers job artifacts end to end under runc and runsc:
// globs collect exactly the regular files (never a symlink), with the
// right sha256, size and MIME; identical content is one blob; files over
// the cap are listed as skipped; downloads honour Range; other tenants get
// 404; background and session jobs collect too; the artifacts outlive the
// sandbox; the CLI lists and fetches them.
func TestArtifacts(t *testing.T) {
	t.Parallel()
	otherKey := "e2e_other_" + randomHex(t, 12)
	e := newEnv(t, "tenants: {other: {api_keys: [\""+otherKey+"\"]}}\n"+artifactConfig)
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	other := client.New(svc.url(), otherKey)

	eachRuntime(t, e, func(t *testing.T, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*callTimeout)
		defer cancel()
		sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt})
		res, err := c.Exec(ctx, sb.ID, client.ExecRequest{Script: artifactScript, Env: map[string]string{"TAG": rt},
			TimeoutMS: 60_000, Artifacts: &client.ArtifactRequest{Paths: []string{"out/*.png", "report/**", "/workspace/data", "missing/*"}}})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 3 || res.Artifacts == nil || res.Artifacts.State != "done" || res.Artifacts.Collected != 4 || res.Artifacts.Skipped != 1 {
			t.Fatalf("exec: exit %d stderr %q artifacts %+v; want exit 3, done, 4 collected, 1 skipped", res.ExitCode, res.Stderr, res.Artifacts)
		}
		png := []byte("\x89PNG\r\n\x1a\n" + rt + "-image")
		want := map[string]struct {
			content []byte
			mime    string
		}{
			"out/a.png":        {png, "image/png"},
			"out/b.png":        {png, "image/png"},
			"report/sub/r.txt": {[]byte(rt + " report\n"), "text/plain; charset=utf-8"},
			"data":             {[]byte("plain " + rt + " text\n"), "text/plain; charset=utf-8"},
		}
		list, err := c.ListArtifacts(ctx, res.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if list.State != "done" || len(list.Items) != len(want) || len(list.Skipped) != 1 {
			t.Fatalf("list: %+v", list)
		}
		if sk := list.Skipped[0]; sk.Path != "out/big.png" || sk.Reason != "file_too_large" || sk.Size != 100000 {
			t.Errorf("skipped entry %+v, want out/big.png file_too_large of 100000 bytes", sk)
		}
		byPath := map[string]client.Artifact{}
		for _, a := range list.Items {
			byPath[a.Path] = a
			w, ok := want[a.Path]
			switch {
			case !ok:
				t.Errorf("unexpected artifact %s (symlinks and directories must not be kept)", a.Path)
			case a.SHA256 != sum(w.content) || a.Size != int64(len(w.content)) || a.MIME != w.mime:
				t.Errorf("%s: sha256 %s size %d mime %q; want %s %d %q", a.Path, a.SHA256, a.Size, a.MIME, sum(w.content), len(w.content), w.mime)
			case a.JobID != res.JobID || a.SandboxID != sb.ID || a.Name != filepath.Base(a.Path) || !a.ExpiresAt.After(a.CreatedAt):
				t.Errorf("%s: metadata %+v", a.Path, a)
			}
		}
		// Identical content is stored once.
		a, b := byPath["out/a.png"], byPath["out/b.png"]
		if a.ID == b.ID || a.SHA256 != b.SHA256 {
			t.Fatalf("a.png and b.png: %+v %+v", a, b)
		}
		blobs := map[string]bool{}
		for _, it := range list.Items {
			if _, err := os.Stat(filepath.Join(e.dataDir, "artifacts", it.SHA256[:2], it.SHA256)); err != nil {
				t.Errorf("blob of %s: %v", it.Path, err)
			}
			blobs[it.SHA256] = true
		}
		if len(blobs) != 3 {
			t.Errorf("%d distinct blobs for 4 artifacts with 3 contents", len(blobs))
		}

		// Downloads: whole, a range, a range past the end, conditional.
		d, err := c.DownloadArtifact(ctx, a.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(d.Body)
		d.Body.Close()
		if !bytes.Equal(body, png) || d.Status != http.StatusOK || d.ETag != `"`+a.SHA256+`"` || d.ContentType != "image/png" ||
			d.Header.Get("Content-Disposition") != `attachment; filename=a.png` {
			t.Errorf("download: status %d etag %s type %q disposition %q body %q", d.Status, d.ETag, d.ContentType, d.Header.Get("Content-Disposition"), body)
		}
		d, err = c.DownloadArtifact(ctx, a.ID, &client.ByteRange{Offset: 8, Length: 3})
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(d.Body)
		d.Body.Close()
		if d.Status != http.StatusPartialContent || string(body) != string(png[8:11]) || d.Size != int64(len(png)) {
			t.Errorf("range: status %d body %q size %d", d.Status, body, d.Size)
		}
		if _, err := c.DownloadArtifact(ctx, a.ID, &client.ByteRange{Offset: 1000}); client.ErrorCode(err) != "range_not_satisfiable" {
			t.Errorf("range past the end: %v", err)
		}
		if meta, err := c.GetArtifact(ctx, a.ID); err != nil || meta.SHA256 != a.SHA256 || meta.Path != "out/a.png" {
			t.Errorf("meta: %+v %v", meta, err)
		}

		// Another tenant sees none of it.
		if _, err := other.ListArtifacts(ctx, res.JobID); !client.IsNotFound(err) {
			t.Errorf("other tenant lists artifacts: %v", err)
		}
		if _, err := other.GetArtifact(ctx, a.ID); !client.IsNotFound(err) {
			t.Errorf("other tenant reads metadata: %v", err)
		}
		if _, err := other.DownloadArtifact(ctx, a.ID, nil); !client.IsNotFound(err) {
			t.Errorf("other tenant downloads: %v", err)
		}

		// Bad requests change nothing.
		for _, bad := range []client.ArtifactRequest{
			{Paths: []string{"../etc/*"}}, {Paths: []string{"/etc/passwd"}}, {Paths: []string{}},
			{Paths: []string{"out/*"}, MaxFileBytes: 1 << 40},
		} {
			_, err := c.Exec(ctx, sb.ID, client.ExecRequest{Script: "touch /workspace/ran", Artifacts: &bad})
			var apiErr *client.APIError
			if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest {
				t.Errorf("artifacts %+v: %v, want 400", bad, err)
			}
		}
		if r := execOK(t, c, sb.ID, "test -e /workspace/ran && echo ran || echo no"); r.Stdout != "no\n" {
			t.Errorf("a refused exec ran: %q", r.Stdout)
		}

		// Background and streamed jobs collect too, before their exit is
		// visible.
		bg, err := c.StartJob(ctx, sb.ID, client.ExecRequest{Script: "echo bg > /workspace/out/bg.txt",
			Artifacts: &client.ArtifactRequest{Paths: []string{"out/*.txt"}}})
		if err != nil {
			t.Fatal(err)
		}
		if bg.Artifacts == nil || bg.Artifacts.State == "" {
			t.Errorf("202 job has no artifact summary: %+v", bg.Artifacts)
		}
		eventually(t, finalWithin, "background job artifacts", func() (bool, string) {
			j, err := c.GetJob(ctx, bg.ID)
			if err != nil || j.FinishedAt == nil {
				return false, "running"
			}
			return j.Artifacts != nil && j.Artifacts.State == "done" && j.Artifacts.Collected == 1, "job " + j.State
		})
		var streamedJob string
		err = c.ExecStream(ctx, sb.ID, client.ExecRequest{Script: "echo st > /workspace/out/st.txt; echo done",
			Artifacts: &client.ArtifactRequest{Paths: []string{"out/st.txt"}}}, client.StreamOptions{}, func(ev client.LogEvent) error {
			switch {
			case ev.Job != nil:
				streamedJob = ev.Job.ID
			case ev.Exit != nil:
				j, err := c.GetJob(ctx, streamedJob)
				if err != nil || j.Artifacts == nil || j.Artifacts.State != "done" || j.Artifacts.Collected != 1 {
					t.Errorf("at the exit event of a streamed job its artifacts are %+v (%v), want done with 1", j, err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		se, err := c.CreateSession(ctx, sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		sres, err := c.SessionExec(ctx, se.ID, client.ExecRequest{Script: "cd /workspace/out && echo s > s.txt",
			Artifacts: &client.ArtifactRequest{Paths: []string{"out/s.txt"}}})
		if err != nil || sres.Artifacts == nil || sres.Artifacts.Collected != 1 {
			t.Errorf("session exec artifacts: %+v %v", sres, err)
		}

		// The CLI lists and fetches.
		r := svc.cli(t, "artifacts", "ls", res.JobID)
		if r.code != 0 || !hasRow(r.stdout, a.ID, "out/a.png", strconv.Itoa(len(png)), "image/png") || !strings.Contains(r.stdout, "out/big.png") {
			t.Errorf("artifacts ls: %v", r)
		}
		out := filepath.Join(t.TempDir(), "got.png")
		if r := svc.cli(t, "artifacts", "get", a.ID, "-o", out); r.code != 0 {
			t.Errorf("artifacts get: %v", r)
		} else if got, _ := os.ReadFile(out); !bytes.Equal(got, png) {
			t.Errorf("artifacts get wrote %q", got)
		}

		// A job still running when its sandbox goes: the collection fails,
		// the failure is recorded, and the job keeps its own end.
		doomed, err := c.StartJob(ctx, sb.ID, client.ExecRequest{Script: "touch /workspace/out/late.txt; sleep 120",
			Artifacts: &client.ArtifactRequest{Paths: []string{"out/late.txt"}}})
		if err != nil {
			t.Fatal(err)
		}

		// The artifacts outlive the sandbox.
		if err := c.DeleteSandbox(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		eventually(t, finalWithin, "job of the deleted sandbox ends with its artifact failure recorded", func() (bool, string) {
			j, err := c.GetJob(ctx, doomed.ID)
			if err != nil || j.FinishedAt == nil || j.Artifacts == nil {
				return false, errString(err)
			}
			return (j.State == "canceled" || j.State == "lost") && j.Artifacts.State == "failed" && j.Artifacts.Error != "" && j.Artifacts.Collected == 0,
				j.State + " " + j.Artifacts.State + " " + j.Artifacts.Error
		})
		d, err = c.DownloadArtifact(ctx, byPath["report/sub/r.txt"].ID, nil)
		if err != nil {
			t.Fatalf("download after the sandbox is gone: %v", err)
		}
		body, _ = io.ReadAll(d.Body)
		d.Body.Close()
		if string(body) != rt+" report\n" {
			t.Errorf("after delete: %q", body)
		}
		if l, err := c.ListArtifacts(ctx, res.JobID); err != nil || len(l.Items) != 4 {
			t.Errorf("list after delete: %+v %v", l, err)
		}
	})
}

// TestArtifactRetention checks that the reconciler removes artifacts past
// their retention, records and unused blobs, under runc and runsc.
func TestArtifactRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "intervals: {reconcile: 1s, artifact_retention: 20s}\n")
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	eachRuntime(t, e, func(t *testing.T, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*callTimeout)
		defer cancel()
		sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt})
		res, err := c.Exec(ctx, sb.ID, client.ExecRequest{Script: "echo " + rt + "-gc > /workspace/gc.txt",
			Artifacts: &client.ArtifactRequest{Paths: []string{"gc.txt"}}})
		if err != nil || res.Artifacts == nil || res.Artifacts.Collected != 1 {
			t.Fatalf("exec: %+v %v", res, err)
		}
		list, err := c.ListArtifacts(ctx, res.JobID)
		if err != nil || len(list.Items) != 1 {
			t.Fatalf("list: %+v %v", list, err)
		}
		a := list.Items[0]
		blob := filepath.Join(e.dataDir, "artifacts", a.SHA256[:2], a.SHA256)
		if _, err := os.Stat(blob); err != nil {
			t.Fatalf("blob: %v", err)
		}
		eventually(t, 2*time.Minute, "expired artifact and its blob removed", func() (bool, string) {
			_, gerr := c.GetArtifact(ctx, a.ID)
			_, serr := os.Stat(blob)
			return client.IsNotFound(gerr) && os.IsNotExist(serr), "meta: " + errString(gerr) + "; blob: " + errString(serr)
		})
		if l, err := c.ListArtifacts(ctx, res.JobID); err != nil || len(l.Items) != 0 {
			t.Errorf("list after expiry: %+v %v", l, err)
		}
	})
}

func errString(err error) string {
	if err == nil {
		return "none"
	}
	return err.Error()
}
