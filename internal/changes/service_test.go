package changes

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/files"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/trace"
)

// fakeFile is a file of fakeFS.
type fakeFile struct {
	data []byte
	mode string
}

// fakeFS is a sandbox's workspace in memory behind the gateway's methods
// the service uses (the gateway and agent themselves are tested in
// internal/files and the e2e tests).
type fakeFS struct {
	mu     sync.Mutex
	files  map[string]fakeFile // absolute path
	writes int
	failOn string // a WriteFile of a staging file for this target fails
}

func (f *fakeFS) snapshot() map[string]fakeFile {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.files)
}

func (f *fakeFS) ReadArchive(ctx context.Context, tenant, id, dir string) (io.ReadCloser, context.CancelFunc, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, p := range slices.Sorted(maps.Keys(f.files)) {
		var mode int64
		fmt.Sscanf(f.files[p].mode, "%o", &mode)
		tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(p, dir+"/"), Mode: mode, Size: int64(len(f.files[p].data)), Typeflag: tar.TypeReg})
		tw.Write(f.files[p].data)
	}
	tw.Close()
	return io.NopCloser(&b), func() {}, nil
}

func (f *fakeFS) StatFile(ctx context.Context, tenant, id, p string) (files.FileInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	x, ok := f.files[p]
	if !ok {
		return files.FileInfo{}, fmt.Errorf("%s: %w", p, errdefs.ErrNotFound)
	}
	return files.FileInfo{Path: p, Type: "file", Size: int64(len(x.data)), Mode: x.mode}, nil
}

func (f *fakeFS) ReadFile(ctx context.Context, tenant, id, method, p string, cond http.Header) (*agentclient.FileResponse, context.CancelFunc, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	x, ok := f.files[p]
	if !ok {
		return nil, nil, fmt.Errorf("%s: %w", p, errdefs.ErrNotFound)
	}
	return &agentclient.FileResponse{Status: 200, Body: io.NopCloser(bytes.NewReader(x.data))}, func() {}, nil
}

func (f *fakeFS) WriteFile(ctx context.Context, in files.WriteFileInput) (files.FileWriteResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failOn != "" && path.Dir(in.Path) == path.Dir(f.failOn) {
		return files.FileWriteResult{}, fmt.Errorf("disk full: %w", errdefs.ErrUnavailable)
	}
	b, _ := io.ReadAll(in.Body)
	f.files[in.Path] = fakeFile{data: b, mode: in.Mode}
	f.writes++
	return files.FileWriteResult{Path: in.Path}, nil
}

func (f *fakeFS) MoveFile(ctx context.Context, tenant, id string, req files.MoveRequest) (files.FileInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	x, ok := f.files[req.From]
	if !ok {
		return files.FileInfo{}, errdefs.ErrNotFound
	}
	delete(f.files, req.From)
	f.files[req.To] = x
	return files.FileInfo{Path: req.To}, nil
}

func (f *fakeFS) DeleteFile(ctx context.Context, tenant, id string, req files.DeleteRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.files[req.Path]; !ok {
		return errdefs.ErrNotFound
	}
	delete(f.files, req.Path)
	return nil
}

type fakeSandboxes struct{}

func (fakeSandboxes) GetSandbox(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error) {
	if tenant != "a" {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return &sandbox.Sandbox{ID: id, Tenant: tenant}, nil
}

type traceRec struct {
	mu     sync.Mutex
	events []trace.Event
}

func (r *traceRec) Record(ctx context.Context, tenant, id string, e trace.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func newFake(t *testing.T) (*Service, *fakeFS, *traceRec) {
	t.Helper()
	fs := &fakeFS{files: map[string]fakeFile{
		"/workspace/one.txt": {data: []byte("a\nb\nc\n"), mode: "0644"},
		"/workspace/two.txt": {data: []byte("x\ny\nz\n"), mode: "0644"},
	}}
	rec := &traceRec{}
	s, err := New(Config{Files: fs, Sandboxes: fakeSandboxes{}, Trace: rec})
	if err != nil {
		t.Fatal(err)
	}
	return s, fs, rec
}

// TestServicePatchAllOrNothing: a patch whose second file conflicts, one
// whose staging fails half way and one for another tenant leave the
// workspace as it was; a good one changes exactly its files, leaves no
// staging file and is traced.
func TestServicePatchAllOrNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, fs, rec := newFake(t)
	before := fs.snapshot()
	good := "--- a/one.txt\n+++ b/one.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n" +
		"--- /dev/null\n+++ b/sub/new.txt\n@@ -0,0 +1 @@\n+new\n" +
		"--- a/two.txt\n+++ b/two.txt\n@@ -1,3 +1,3 @@\n x\n-y\n+Y\n z\n"
	bad := strings.Replace(good, "-y\n+Y", "-q\n+Y", 1)

	_, err := s.Patch(ctx, "a", "sbx_1", []byte(bad), PatchOptions{})
	if errdefs.Code(err) != CodePatchConflict || !strings.Contains(err.Error(), "two.txt: hunk 1") {
		t.Fatalf("conflicting patch: %v", err)
	}
	if !maps.EqualFunc(before, fs.snapshot(), func(x, y fakeFile) bool { return bytes.Equal(x.data, y.data) && x.mode == y.mode }) || fs.writes != 0 {
		t.Fatalf("a conflicting patch changed files: %v (%d writes)", fs.snapshot(), fs.writes)
	}
	if _, err := s.Patch(ctx, "b", "sbx_1", []byte(good), PatchOptions{}); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("another tenant's patch: %v", err)
	}
	fs.failOn = "/workspace/two.txt"
	if _, err := s.Patch(ctx, "a", "sbx_1", []byte(good), PatchOptions{}); err == nil {
		t.Fatal("a patch whose staging failed succeeded")
	}
	fs.failOn = ""
	if got := fs.snapshot(); len(got) != len(before) || !bytes.Equal(got["/workspace/one.txt"].data, before["/workspace/one.txt"].data) {
		t.Fatalf("a failed staging left %v", got)
	}
	res, err := s.Patch(ctx, "a", "sbx_1", []byte(good), PatchOptions{DryRun: true})
	if err != nil || res.Applied || len(res.Files) != 3 || len(fs.snapshot()) != 2 {
		t.Fatalf("dry run: %+v %v", res, err)
	}
	res, err = s.Patch(ctx, "a", "sbx_1", []byte(good), PatchOptions{})
	if err != nil || !res.Applied {
		t.Fatalf("patch: %+v %v", res, err)
	}
	got := fs.snapshot()
	want := map[string]string{"/workspace/one.txt": "a\nB\nc\n", "/workspace/two.txt": "x\nY\nz\n", "/workspace/sub/new.txt": "new\n"}
	if len(got) != len(want) {
		t.Fatalf("after the patch: %v", slices.Sorted(maps.Keys(got)))
	}
	for p, v := range want {
		if string(got[p].data) != v {
			t.Errorf("%s: %q, want %q", p, got[p].data, v)
		}
	}
	if len(s.locks) != 0 {
		t.Errorf("%d patch locks left after the patches", len(s.locks))
	}
	if len(rec.events) != 1 || rec.events[0].Kind != "files.patched" || !strings.Contains(string(rec.events[0].Data), "sub/new.txt") {
		t.Errorf("trace: %+v", rec.events)
	}
}

// TestServicePatchReadLimit: a patch whose files are over
// MaxPatchReadBytes together is refused with 413 and changes nothing; one
// within it applies.
func TestServicePatchReadLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fs := &fakeFS{files: map[string]fakeFile{
		"/workspace/one.txt": {data: []byte("a\nb\nc\n"), mode: "0644"},
		"/workspace/two.txt": {data: []byte("x\ny\nz\n"), mode: "0644"},
	}}
	s, err := New(Config{Files: fs, Sandboxes: fakeSandboxes{}, Limits: Limits{MaxPatchReadBytes: 10}})
	if err != nil {
		t.Fatal(err)
	}
	one := "--- a/one.txt\n+++ b/one.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
	both := one + "--- a/two.txt\n+++ b/two.txt\n@@ -1,3 +1,3 @@\n x\n-y\n+Y\n z\n"
	_, err = s.Patch(ctx, "a", "sbx_1", []byte(both), PatchOptions{})
	if errdefs.Code(err) != CodePatchTooLarge || errdefs.HTTPStatus(err) != 413 || !strings.Contains(err.Error(), "10 bytes together") {
		t.Fatalf("patch over the read limit: %v", err)
	}
	if fs.writes != 0 || string(fs.snapshot()["/workspace/one.txt"].data) != "a\nb\nc\n" {
		t.Fatalf("a refused patch changed files (%d writes)", fs.writes)
	}
	if res, err := s.Patch(ctx, "a", "sbx_1", []byte(one), PatchOptions{}); err != nil || !res.Applied {
		t.Fatalf("patch within the read limit: %+v %v", res, err)
	}
}

func TestServiceDiff(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, fs, _ := newFake(t)
	fs.files["/workspace/bin.dat"] = fakeFile{data: []byte("\x00\x01"), mode: "0644"}
	d, err := s.Diff(ctx, "a", "sbx_1", "")
	if err != nil || d.Base != BaseCreation || d.Summary.Added != 3 {
		t.Fatalf("diff against creation: %+v %v", d, err)
	}
	for _, f := range d.Files {
		if f.Path == "bin.dat" && (!f.Binary || strings.Contains(f.Diff, "\x00")) {
			t.Errorf("binary file: %+v", f)
		}
	}
	for _, base := range []string{"HEAD", "../x", "sbx_1", "snap_0000000000000000"} {
		if _, err := s.Diff(ctx, "a", "sbx_1", base); err == nil || errdefs.HTTPStatus(err) >= 500 && errdefs.HTTPStatus(err) != 501 {
			t.Errorf("base %q: %v", base, err)
		}
	}
	if _, err := s.Diff(ctx, "b", "sbx_1", ""); !errdefs.Is(err, errdefs.ErrNotFound) {
		t.Errorf("another tenant's diff: %v", err)
	}
}

// goneParent is a sandbox made from a snapshot that no longer exists.
type goneParent struct{}

func (goneParent) GetSandbox(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error) {
	return &sandbox.Sandbox{ID: id, Tenant: tenant, Metadata: map[string]string{"genesis.snapshot": "snap_0000000000000000"}}, nil
}

type noSnapshots struct{}

func (noSnapshots) OpenWorkspace(ctx context.Context, tenant, id string) (io.ReadCloser, error) {
	return nil, fmt.Errorf("snapshot %s: %w", id, errdefs.ErrNotFound)
}

func TestServiceDiffCreationSnapshotGone(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Files: &fakeFS{files: map[string]fakeFile{}}, Sandboxes: goneParent{}, Snapshots: noSnapshots{}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Diff(context.Background(), "a", "sbx_1", "")
	if errdefs.Code(err) != "base_unavailable" || errdefs.HTTPStatus(err) != 409 || !strings.Contains(err.Error(), "snap_0000000000000000") {
		t.Fatalf("creation base gone: %v (%s)", err, errdefs.Code(err))
	}
	if len(s.locks) != 0 {
		t.Fatal("locks left")
	}
}
