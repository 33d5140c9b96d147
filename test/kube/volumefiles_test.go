//go:build kube

package kube

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"genesis.dev/sandbox/client"
)

// TestVolumeFiles: the files API of a volume without a sandbox on
// Kubernetes, served by a short-lived helper Pod per call. A file uploaded
// to a fresh volume is read by a Pod sandbox that mounts it; what the
// sandbox writes comes back through a ranged download after the sandbox
// is gone; list, stat and delete work; a path that leaves the volume
// (`..`, or a symlink the sandbox left) is 400 invalid_path; an upload or
// a delete while a sandbox holds the volume writable is 409 volume_busy;
// and no helper Pod or hold outlives its call.
func TestVolumeFiles(t *testing.T) {
	clearManagedPods(t)
	cs := clientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	_ = cs.StorageV1().StorageClasses().Delete(ctx, testClass, metav1.DeleteOptions{})
	offerLocalVolumes(ctx, t, cs, 1)
	s := startService(t, t.TempDir(), "")
	c := s.client()
	if _, err := c.CreateVolume(ctx, "files", 64); err != nil {
		t.Fatal(err)
	}
	unheld := func(what string) {
		t.Helper()
		noManagedPods(t)
		if v, err := c.GetVolume(ctx, "files"); err != nil || len(v.Mounts) != 0 {
			t.Fatalf("%s: the volume is held: %+v, %v", what, v, err)
		}
	}

	seed := "hello from the API\n"
	w, err := c.WriteVolumeFile(ctx, "files", "/seed/hello.txt", strings.NewReader(seed), client.WriteFileOptions{Mode: "0640"})
	if err != nil {
		t.Fatalf("upload to a fresh volume: %v", err)
	}
	if w.Path != "/seed/hello.txt" || w.Size != int64(len(seed)) || w.Mode != "0640" {
		t.Fatalf("upload: %+v", w)
	}
	unheld("after an upload")
	if _, err := c.WriteVolumeFile(ctx, "files", "/seed/hello.txt", strings.NewReader("x"), client.WriteFileOptions{NoOverwrite: true}); !hasCode(err, 409, "file_exists") {
		t.Fatalf("an upload over a file without overwrite: %v; want 409 file_exists", err)
	}
	for _, p := range []string{"../escape.txt", "/seed/../../escape.txt"} {
		if _, err := c.WriteVolumeFile(ctx, "files", p, strings.NewReader("x"), client.WriteFileOptions{}); !hasCode(err, 400, "invalid_path") {
			t.Fatalf("an upload to %s: %v; want 400 invalid_path", p, err)
		}
	}
	st, err := c.StatVolumeFile(ctx, "files", "/seed/hello.txt")
	if err != nil || st.Type != "file" || st.Size != int64(len(seed)) || st.Mode != "0640" || st.Path != "/seed/hello.txt" {
		t.Fatalf("stat: %+v, %v", st, err)
	}
	l, err := c.ListVolumeFiles(ctx, "files", "/", 0)
	if err != nil || l.Path != "/" || !hasEntry(l, "/seed", "dir") {
		t.Fatalf("list /: %+v, %v; want /seed", l, err)
	}
	unheld("after reads")

	// A sandbox mounts it writable: it reads the seed and writes; the
	// files API may not write meanwhile.
	sb, err := c.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: "runc", RiskLevel: "low",
		Volumes: []client.VolumeMount{{Volume: "files", Path: "/mnt/data"}}}, "")
	if err != nil {
		t.Fatal(err)
	}
	script := "cat /mnt/data/seed/hello.txt && printf 0123456789abcdef > /mnt/data/out.bin && ln -s /etc/passwd /mnt/data/escape"
	res, err := c.Exec(ctx, sb.ID, client.ExecRequest{Script: script})
	if err != nil || res.ExitCode != 0 || res.Stdout != seed {
		t.Fatalf("the sandbox reads the upload and writes: %+v, %v", res, err)
	}
	if _, err := c.WriteVolumeFile(ctx, "files", "/late.txt", strings.NewReader("x"), client.WriteFileOptions{}); !hasCode(err, 409, "volume_busy") {
		t.Fatalf("an upload while a sandbox holds the volume writable: %v; want 409 volume_busy", err)
	}
	if err := c.DeleteVolumeFile(ctx, "files", client.DeleteFileRequest{Path: "/seed/hello.txt"}); !hasCode(err, 409, "volume_busy") {
		t.Fatalf("a delete while a sandbox holds the volume writable: %v; want 409 volume_busy", err)
	}
	if err := c.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	unheld("after the sandbox")

	// What the sandbox wrote, by a ranged download once it is gone.
	d, err := c.ReadVolumeFile(ctx, "files", "/out.bin", &client.ByteRange{Offset: 4, Length: 6})
	if err != nil {
		t.Fatalf("ranged download: %v", err)
	}
	b, err := io.ReadAll(d.Body)
	d.Body.Close()
	if err != nil || d.Status != 206 || string(b) != "456789" || d.Size != 16 {
		t.Fatalf("ranged download: status %d size %d body %q, %v; want 206 of 16 bytes %q", d.Status, d.Size, b, err, "456789")
	}
	d, err = c.ReadVolumeFile(ctx, "files", "/out.bin", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err = io.ReadAll(d.Body)
	d.Body.Close()
	if err != nil || d.Status != 200 || string(b) != "0123456789abcdef" {
		t.Fatalf("download: %d %q, %v", d.Status, b, err)
	}
	// The sandbox's symlink out of the volume is refused like `..`.
	if _, err := c.ReadVolumeFile(ctx, "files", "/escape", nil); !hasCode(err, 400, "invalid_path") {
		t.Fatalf("a download through a symlink out of the volume: %v; want 400 invalid_path", err)
	}
	if _, err := c.ListVolumeFiles(ctx, "files", "/escape", 0); !hasCode(err, 400, "invalid_path") {
		t.Fatalf("a listing through a symlink out of the volume: %v; want 400 invalid_path", err)
	}

	// Deletes.
	if err := c.DeleteVolumeFile(ctx, "files", client.DeleteFileRequest{Path: "/out.bin"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StatVolumeFile(ctx, "files", "/out.bin"); !hasCode(err, 404, "file_not_found") {
		t.Fatalf("stat of a deleted file: %v; want 404 file_not_found", err)
	}
	if err := c.DeleteVolumeFile(ctx, "files", client.DeleteFileRequest{Path: "/seed", Recursive: true}); err != nil {
		t.Fatal(err)
	}
	l, err = c.ListVolumeFiles(ctx, "files", "/", 0)
	if err != nil || hasEntry(l, "/seed", "dir") || hasEntry(l, "/out.bin", "file") || !hasEntry(l, "/escape", "symlink") {
		t.Fatalf("list / after deletes: %+v, %v; want only /escape", l, err)
	}
	unheld("after deletes")
	if err := c.DeleteVolume(ctx, "files"); err != nil {
		t.Fatal(err)
	}
}

// hasEntry reports whether l lists path p of type typ.
func hasEntry(l *client.FileList, p, typ string) bool {
	for _, e := range l.Entries {
		if e.Path == p && e.Type == typ {
			return true
		}
	}
	return false
}
