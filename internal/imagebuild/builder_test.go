package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/images"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
)

// fakeImporter records calls; present says which refs exist.
type fakeImporter struct {
	mu         sync.Mutex
	present    map[string]bool
	presentErr error
	checks     int
	imports    []fakeImport
	importErr  error
	readAll    bool // read the whole stream (and keep it) before answering
}

type fakeImport struct {
	ref     string
	labels  map[string]string
	changes []string
	data    []byte
	readErr error
}

func (f *fakeImporter) ImagePresent(ctx context.Context, ref string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checks++
	if _, ok := ctx.Deadline(); !ok {
		return false, errors.New("ImagePresent called without a deadline")
	}
	return f.present[ref], f.presentErr
}

func (f *fakeImporter) ImportImage(ctx context.Context, ref string, rootfs io.Reader, labels map[string]string, changes []string) error {
	imp := fakeImport{ref: ref, labels: labels, changes: changes}
	if f.readAll {
		imp.data, imp.readErr = io.ReadAll(rootfs)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.imports = append(f.imports, imp)
	if imp.readErr != nil {
		return imp.readErr
	}
	if f.importErr != nil {
		return f.importErr
	}
	if f.present == nil {
		f.present = map[string]bool{}
	}
	f.present[ref] = true
	return nil
}

func newTestBuilder(t *testing.T, imp Importer) *Builder {
	t.Helper()
	b, err := New(Config{Importer: imp, WorkDir: t.TempDir(), Mirror: "http://mirror.invalid/debian",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

func mustRecipe(t *testing.T, name string) images.Recipe {
	t.Helper()
	r, ok := images.Lookup(name)
	if !ok {
		t.Fatalf("no recipe %q", name)
	}
	return r
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	cases := map[string]Config{
		"no importer":  {},
		"bad mirror":   {Importer: &fakeImporter{}, Mirror: "ftp.example/debian"},
		"comma in dir": {Importer: &fakeImporter{}, WorkDir: "/tmp/a,b"},
		"bad prefix":   {Importer: &fakeImporter{}, Repository: "Genesis"},
	}
	for name, cfg := range cases {
		if _, err := New(cfg); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: New error = %v, want ErrInvalidArgument", name, err)
		}
	}
	b, err := New(Config{Importer: &fakeImporter{}})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(os.TempDir(), "genesis-imagebuild"); b.workDir != want {
		t.Errorf("default work dir = %q, want %q", b.workDir, want)
	}
}

func TestBuildUnknownProfile(t *testing.T) {
	t.Parallel()
	imp := &fakeImporter{}
	b := newTestBuilder(t, imp)
	_, err := b.Build(t.Context(), "no-such-profile", false)
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("Build error = %v, want ErrInvalidArgument", err)
	}
	if imp.checks != 0 {
		t.Errorf("unknown profile reached the importer %d times", imp.checks)
	}
}

func TestBuildSkipsPresentImage(t *testing.T) {
	t.Parallel()
	r := mustRecipe(t, "tool-basic")
	imp := &fakeImporter{present: map[string]bool{r.Ref(): true}}
	b := newTestBuilder(t, imp)
	// Skipping needs neither root nor host tools.
	b.geteuid = func() int { return 1000 }
	b.findTool = func(string) (string, error) { return "", errors.New("no tools") }
	res, err := b.Build(t.Context(), "tool-basic", false)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if !res.Skipped || res.Ref != r.Ref() || res.Hash != r.Hash || res.Name != "tool-basic" {
		t.Fatalf("Result = %+v, want skipped %s", res, r.Ref())
	}
	if len(imp.imports) != 0 {
		t.Fatalf("skipped build imported %d images", len(imp.imports))
	}
	// force does not skip: it reaches the host checks.
	if _, err := b.Build(t.Context(), "tool-basic", true); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("forced Build error = %v, want ErrFailedPrecondition (not root)", err)
	}
}

func TestBuildHostPreconditions(t *testing.T) {
	t.Parallel()
	b := newTestBuilder(t, &fakeImporter{})
	b.geteuid = func() int { return 1000 }
	_, err := b.Build(t.Context(), "tool-basic", false)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "root") {
		t.Fatalf("not root: error = %v, want ErrFailedPrecondition mentioning root", err)
	}

	b.geteuid = func() int { return 0 }
	b.findTool = func(name string) (string, error) {
		if name == "debootstrap" {
			return "", errors.New("debootstrap not found on PATH or in sbin")
		}
		return "/bin/true", nil
	}
	_, err = b.Build(t.Context(), "tool-basic", false)
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "scripts/host-setup.sh") ||
		!strings.Contains(err.Error(), "debootstrap") {
		t.Fatalf("no debootstrap: error = %v, want ErrFailedPrecondition naming debootstrap and scripts/host-setup.sh", err)
	}
}

func TestBuildEngineErrorIsUnavailable(t *testing.T) {
	t.Parallel()
	b := newTestBuilder(t, &fakeImporter{presentErr: errors.New("connection refused")})
	_, err := b.Build(t.Context(), "tool-basic", false)
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("error = %v, want ErrUnavailable", err)
	}
	nf := &fakeImporter{presentErr: errdefs.ErrNotImplemented}
	b = newTestBuilder(t, nf)
	if _, err := b.Build(t.Context(), "tool-basic", false); !errors.Is(err, errdefs.ErrNotImplemented) || errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("classified error lost its class: %v", err)
	}
}

func TestBuildsRunOneAtATime(t *testing.T) {
	t.Parallel()
	r := mustRecipe(t, "tool-basic")
	b := newTestBuilder(t, &fakeImporter{present: map[string]bool{r.Ref(): true}})
	<-b.turn // a build is running
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, err := b.Build(ctx, "tool-basic", false)
	if !errors.Is(err, errdefs.ErrDeadlineExceeded) {
		t.Fatalf("Build while another runs: error = %v, want ErrDeadlineExceeded", err)
	}
	b.turn <- struct{}{}
	if res, err := b.Build(t.Context(), "tool-basic", false); err != nil || !res.Skipped {
		t.Fatalf("Build after release = %+v, %v", res, err)
	}
}

func TestFileLockExcludes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.lock")
	l1, err := lockFile(t.Context(), path, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := lockFile(ctx, path, 10*time.Millisecond); !errors.Is(err, errdefs.ErrDeadlineExceeded) {
		t.Fatalf("second lock: error = %v, want ErrDeadlineExceeded", err)
	}
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		l2, err := lockFile(ctx, path, 10*time.Millisecond)
		if err == nil {
			l2.unlock()
		}
		got <- err
	}()
	l1.unlock()
	if err := <-got; err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
}

func TestImportRootfsStreamsTree(t *testing.T) {
	t.Parallel()
	tarPath, err := exec.LookPath("tar")
	if err != nil {
		t.Skip("tar not available")
	}
	rootfs := t.TempDir()
	if err := os.MkdirAll(filepath.Join(rootfs, "workspace"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "hello"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	imp := &fakeImporter{readAll: true}
	b := newTestBuilder(t, imp)
	r := mustRecipe(t, "code-python-basic")
	tk := newTracker(b.log, r.Name, r.Ref(), "", steps(r))
	tk.step(StepImport, "bytes", treeSize(rootfs))
	if err := b.importRootfs(t.Context(), b.log, tk, r, r.Ref(), hostTools{tar: tarPath}, rootfs); err != nil {
		t.Fatalf("importRootfs: %v", err)
	}
	if len(imp.imports) != 1 {
		t.Fatalf("imports = %d, want 1", len(imp.imports))
	}
	got := imp.imports[0]
	// The step counted the bytes the importer read, against the tree's
	// estimated size.
	if p := tk.snapshot(); p.Step != StepImport || p.Unit != "bytes" || p.Done != int64(len(got.data)) || p.Total < 1024 || p.Percent < 90 {
		t.Errorf("import progress = %+v, want %d bytes counted", p, len(got.data))
	}
	if got.ref != r.Ref() {
		t.Errorf("ref = %q, want %q", got.ref, r.Ref())
	}
	wantLabels := map[string]string{driver.LabelManaged: "true", driver.LabelRecipe: r.Hash, driver.LabelProfile: r.Name}
	for k, v := range wantLabels {
		if got.labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, got.labels[k], v)
		}
	}
	if !slices.Contains(got.changes, "WORKDIR /workspace") || !slices.Contains(got.changes, "ENV LANG=C.UTF-8") {
		t.Errorf("changes = %q", got.changes)
	}
	var names []string
	tr := tar.NewReader(bytes.NewReader(got.data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("tar stream: %v", err)
		}
		names = append(names, h.Name)
	}
	for _, want := range []string{"./hello", "./workspace/"} {
		if !slices.Contains(names, want) {
			t.Errorf("tar lacks %s: %v", want, names)
		}
	}
}

func TestImportRootfsTarFailureFailsImport(t *testing.T) {
	t.Parallel()
	tarPath, err := exec.LookPath("tar")
	if err != nil {
		t.Skip("tar not available")
	}
	imp := &fakeImporter{readAll: true}
	b := newTestBuilder(t, imp)
	r := mustRecipe(t, "tool-basic")
	err = b.importRootfs(t.Context(), b.log, newTracker(b.log, r.Name, r.Ref(), "", steps(r)), r, r.Ref(), hostTools{tar: tarPath}, filepath.Join(t.TempDir(), "missing"))
	if err == nil {
		t.Fatal("importRootfs of a missing tree succeeded")
	}
	if len(imp.imports) != 1 || imp.imports[0].readErr == nil {
		t.Fatalf("the importer's read did not fail: %+v", imp.imports)
	}
	if imp.present[r.Ref()] {
		t.Fatal("a failed stream was imported")
	}
}

func TestImportRootfsImporterStopsEarly(t *testing.T) {
	t.Parallel()
	tarPath, err := exec.LookPath("tar")
	if err != nil {
		t.Skip("tar not available")
	}
	rootfs := t.TempDir()
	// More than a pipe buffer, so tar blocks if nobody reads.
	if err := os.WriteFile(filepath.Join(rootfs, "big"), bytes.Repeat([]byte("x"), 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	imp := &fakeImporter{importErr: errors.New("engine said no")}
	b := newTestBuilder(t, imp)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	r := mustRecipe(t, "tool-basic")
	err = b.importRootfs(ctx, b.log, newTracker(b.log, r.Name, r.Ref(), "", steps(r)), r, r.Ref(), hostTools{tar: tarPath}, rootfs)
	if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "engine said no") {
		t.Fatalf("error = %v, want ErrUnavailable with the engine's message", err)
	}
	if ctx.Err() != nil {
		t.Fatal("importRootfs hung until the deadline")
	}
}

func TestCommandFailureCarriesOutput(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("sh not available")
	}
	c := command{path: sh, args: []string{"-c", "echo out-line; echo err-line >&2; exit 3"}}
	err = c.run(t.Context(), slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "err-line") || !strings.Contains(err.Error(), "out-line") ||
		!strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("error = %v, want exit status and output", err)
	}
	// Cancelling kills the whole process group, children included.
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	c = command{path: sh, args: []string{"-c", "sleep 30 & sleep 30; wait"}}
	if err := c.run(ctx, slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("cancelled command succeeded")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cancel took %v", d)
	}
}

func TestOutputLogTail(t *testing.T) {
	t.Parallel()
	o := &outputLog{log: slog.New(slog.DiscardHandler), tool: "x", max: 64}
	for i := range 100 {
		_, _ = io.WriteString(o, strings.Repeat("a", i%7)+"line\n")
	}
	_, _ = io.WriteString(o, "last line\n")
	tail := o.tail()
	if len(tail) > 64 || !strings.HasSuffix(tail, "last line") {
		t.Fatalf("tail = %q", tail)
	}
}

func TestRemoveScratch(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "scratch")
	if err := os.MkdirAll(filepath.Join(dir, "rootfs", "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := removeScratch(dir); err != nil {
		t.Fatalf("removeScratch: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("scratch dir still there: %v", err)
	}
}

func TestReadVersions(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if v, err := readVersions(root); err != nil || v != nil {
		t.Fatalf("no versions dir: %v, %v", v, err)
	}
	dir := filepath.Join(root, versionsDir)
	if err := os.MkdirAll(filepath.Join(dir, "subdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"chromium":   "156.0.1\nignored second line\n",
		"playwright": "  1.65.1  \n",
		"empty":      "\n",
		"Bad.Name":   "1",
		"long":       strings.Repeat("x", 129),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v, err := readVersions(root)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"chromium": "156.0.1", "playwright": "1.65.1"}
	if !maps.Equal(v, want) {
		t.Errorf("readVersions = %v, want %v", v, want)
	}
}
