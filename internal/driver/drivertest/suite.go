package drivertest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// Harness is what a driver under test provides to the suite.
type Harness struct {
	// Driver is the driver under test.
	Driver driver.Driver
	// Image is a reference to an image that is present.
	Image string
	// Runtimes are tested one by one; empty means the driver's default
	// runtime only (Spec.Runtime left empty).
	Runtimes []sandbox.Runtime
	// Cmd keeps a container running for minutes, e.g.
	// ["/bin/busybox", "sleep", "300"].
	Cmd []string
	// Labels are added to every container the suite creates (for example
	// a test marker that lets leaked containers be found).
	Labels map[string]string
	// RemoveImage removes an image the suite imported. When nil, the suite
	// does not import images.
	RemoveImage func(ctx context.Context, ref string) error
	// NoPids says the backend reports no process id of a running
	// container (a Pod's processes are the node's business).
	NoPids bool
}

// callTimeout bounds every driver call of the suite.
const callTimeout = 60 * time.Second

// Run runs the conformance suite. newDriver is called once per subtest.
func Run(t *testing.T, newDriver func(t *testing.T) Harness) {
	t.Run("Capabilities", func(t *testing.T) {
		t.Parallel()
		h := newDriver(t)
		if h.Driver.Name() == "" {
			t.Error("Name() is empty")
		}
		_, isImporter := h.Driver.(driver.ImageImporter)
		if got := h.Driver.Capabilities().ImageImport; got != isImporter {
			t.Errorf("Capabilities().ImageImport = %v, but implements driver.ImageImporter = %v", got, isImporter)
		}
	})
	t.Run("ImagePresent", func(t *testing.T) {
		t.Parallel()
		h := newDriver(t)
		ctx := callCtx(t)
		if ok, err := h.Driver.ImagePresent(ctx, h.Image); err != nil || !ok {
			t.Errorf("ImagePresent(%q) = %v, %v; want true, nil", h.Image, ok, err)
		}
		missing := missingImage()
		if ok, err := h.Driver.ImagePresent(ctx, missing); err != nil || ok {
			t.Errorf("ImagePresent(%q) = %v, %v; want false, nil", missing, ok, err)
		}
	})
	t.Run("MissingImage", func(t *testing.T) {
		t.Parallel()
		h := newDriver(t)
		ctx := callCtx(t)
		tag := token()
		spec := baseSpec(h, "", tag)
		spec.Image = missingImage()
		id, err := h.Driver.Create(ctx, spec)
		if err == nil {
			removeLater(t, h.Driver, id)
			t.Fatalf("Create with missing image %s succeeded (id %s)", spec.Image, id)
		}
		if !errors.Is(err, errdefs.ErrFailedPrecondition) || errdefs.Code(err) != "image_not_built" {
			t.Errorf("Create with missing image: err = %v (code %q); want ErrFailedPrecondition with code image_not_built", err, errdefs.Code(err))
		}
		if s := findByLabel(t, h.Driver, tag); len(s) != 0 {
			t.Errorf("failed Create left containers behind: %+v", s)
			for _, c := range s {
				removeLater(t, h.Driver, c.ID)
			}
		}
	})
	t.Run("RemoveNeverExisting", func(t *testing.T) {
		t.Parallel()
		h := newDriver(t)
		ctx := callCtx(t)
		id := "genesis-never-existed-" + token()
		if err := h.Driver.Remove(ctx, id); err != nil {
			t.Errorf("Remove(%s) = %v; want nil", id, err)
		}
		if _, err := h.Driver.Inspect(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("Inspect(%s) = %v; want ErrNotFound", id, err)
		}
	})
	t.Run("DuplicateName", func(t *testing.T) {
		t.Parallel()
		h := newDriver(t)
		ctx := callCtx(t)
		spec := baseSpec(h, "", token())
		id, err := h.Driver.Create(ctx, spec)
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		removeLater(t, h.Driver, id)
		id2, err := h.Driver.Create(ctx, spec)
		if err == nil {
			removeLater(t, h.Driver, id2)
			t.Fatalf("second Create with name %s succeeded", spec.Name)
		}
		if !errors.Is(err, errdefs.ErrAlreadyExists) && !errors.Is(err, errdefs.ErrConflict) {
			t.Errorf("second Create: %v; want ErrAlreadyExists or ErrConflict", err)
		}
	})
	t.Run("ImportImage", func(t *testing.T) {
		t.Parallel()
		h := newDriver(t)
		imp, ok := h.Driver.(driver.ImageImporter)
		if !ok || h.RemoveImage == nil {
			t.Skip("driver does not import images or harness cannot remove them")
		}
		ctx := callCtx(t)
		ref := "genesis-conformance/import:" + token()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			if err := h.RemoveImage(ctx, ref); err != nil {
				t.Errorf("remove image %s: %v", ref, err)
			}
		})
		if err := imp.ImportImage(ctx, ref, bytes.NewReader(tinyTar(t)), map[string]string{driver.LabelRecipe: "abc"}, nil); err != nil {
			t.Fatalf("ImportImage: %v", err)
		}
		if ok, err := h.Driver.ImagePresent(ctx, ref); err != nil || !ok {
			t.Errorf("ImagePresent after import = %v, %v; want true, nil", ok, err)
		}
	})
	runtimes := newDriverRuntimes(t, newDriver)
	for _, rt := range runtimes {
		name := string(rt)
		if name == "" {
			name = "default"
		}
		t.Run("Runtime="+name, func(t *testing.T) {
			t.Parallel()
			t.Run("Lifecycle", func(t *testing.T) {
				t.Parallel()
				lifecycle(t, newDriver(t), rt)
			})
			t.Run("Labels", func(t *testing.T) {
				t.Parallel()
				labels(t, newDriver(t), rt)
			})
		})
	}
}

// newDriverRuntimes asks one harness for the runtimes to test.
func newDriverRuntimes(t *testing.T, newDriver func(t *testing.T) Harness) []sandbox.Runtime {
	var rts []sandbox.Runtime
	t.Run("Setup", func(t *testing.T) {
		rts = slices.Clone(newDriver(t).Runtimes)
	})
	if len(rts) == 0 {
		rts = []sandbox.Runtime{""}
	}
	return rts
}

func lifecycle(t *testing.T, h Harness, rt sandbox.Runtime) {
	ctx := callCtx(t)
	d := h.Driver
	tag := token()
	spec := baseSpec(h, rt, tag)
	id, err := d.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	removeLater(t, d, id)

	st, err := d.Inspect(ctx, id)
	if err != nil {
		t.Fatalf("Inspect after Create: %v", err)
	}
	if st.ID != id || st.Name != spec.Name || st.Running || st.State != "created" || st.CreatedAt.IsZero() {
		t.Errorf("Inspect after Create = %+v; want id %s, name %s, state created, not running, CreatedAt set", st, id, spec.Name)
	}
	if rt != "" && st.Runtime != string(rt) {
		t.Errorf("Inspect Runtime = %q; want %q", st.Runtime, rt)
	}
	if byName, err := d.Inspect(ctx, spec.Name); err != nil || byName.ID != id {
		t.Errorf("Inspect by name = %s, %v; want id %s", byName.ID, err, id)
	}

	if err := d.Start(ctx, id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	st = waitFor(t, d, id, "running", func(s driver.Status) bool { return s.Running })
	if st.State != "running" || (st.Pid == 0 && !h.NoPids) || st.StartedAt.IsZero() {
		t.Errorf("Inspect after Start = %+v; want state running, Pid and StartedAt set", st)
	}
	if err := d.Start(ctx, id); err != nil {
		t.Errorf("Start of a running container: %v; want nil", err)
	}

	listed := findByLabel(t, d, tag)
	if len(listed) != 1 || listed[0].ID != id {
		t.Fatalf("List by our label = %+v; want exactly %s", listed, id)
	}
	if got := listed[0]; !got.Running || got.Labels[driver.LabelManaged] != "true" || got.Name != spec.Name {
		t.Errorf("List entry = %+v; want running, managed label, name %s", got, spec.Name)
	}

	if err := d.Stop(ctx, id, time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	st = waitFor(t, d, id, "stopped", func(s driver.Status) bool { return !s.Running })
	if st.State != "exited" {
		t.Errorf("State after Stop = %q; want exited", st.State)
	}
	if err := d.Stop(ctx, id, time.Second); err != nil {
		t.Errorf("Stop of a stopped container: %v; want nil", err)
	}

	if err := d.Remove(ctx, id); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if err := d.Remove(ctx, id); err != nil {
		t.Errorf("second Remove: %v; want nil", err)
	}
	if _, err := d.Inspect(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Inspect after Remove: %v; want ErrNotFound", err)
	}
	if err := d.Start(ctx, id); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Start after Remove: %v; want ErrNotFound", err)
	}
	if s := findByLabel(t, d, tag); len(s) != 0 {
		t.Errorf("List after Remove still has %+v", s)
	}
}

func labels(t *testing.T, h Harness, rt sandbox.Runtime) {
	ctx := callCtx(t)
	d := h.Driver
	tag := token()
	spec := baseSpec(h, rt, tag)
	want := map[string]string{
		driver.LabelInstance:  "inst-" + tag,
		driver.LabelProfile:   "code-python-basic",
		driver.LabelCreatedAt: "2026-01-02T03:04:05Z",
		driver.LabelExpiresAt: "",
		driver.LabelPurpose:   "sandbox",
		"dev.genesis.note":    `spaces, "quotes", ünïcode = and \ backslash`,
	}
	for k, v := range want {
		spec.Labels[k] = v
	}
	id, err := d.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	removeLater(t, d, id)
	want[driver.LabelManaged] = "true"
	st, err := d.Inspect(ctx, id)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	listed := findByLabel(t, d, tag)
	if len(listed) != 1 {
		t.Fatalf("List by our label = %+v; want one entry", listed)
	}
	for k, v := range want {
		if got, ok := st.Labels[k]; !ok || got != v {
			t.Errorf("Inspect label %s = %q (present %v); want %q", k, got, ok, v)
		}
		if got, ok := listed[0].Labels[k]; !ok || got != v {
			t.Errorf("List label %s = %q (present %v); want %q", k, got, ok, v)
		}
	}
}

// baseSpec is a container spec with a unique name and the label
// dev.genesis.sandbox=tag, so the suite can find exactly its containers.
func baseSpec(h Harness, rt sandbox.Runtime, tag string) driver.Spec {
	l := map[string]string{driver.LabelSandbox: "conf-" + tag}
	if rt != "" {
		l[driver.LabelRuntime] = string(rt)
	}
	for k, v := range h.Labels {
		l[k] = v
	}
	return driver.Spec{
		Name:      "genesis-conf-" + tag,
		Image:     h.Image,
		Runtime:   rt,
		Labels:    l,
		Cmd:       slices.Clone(h.Cmd),
		Resources: sandbox.Resources{CPU: 0.5, MemoryMB: 64, Pids: 64},
	}
}

// findByLabel lists the containers carrying the suite's tag.
func findByLabel(t *testing.T, d driver.Driver, tag string) []driver.Status {
	t.Helper()
	all, err := d.List(callCtx(t))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var out []driver.Status
	for _, s := range all {
		if s.Labels[driver.LabelSandbox] == "conf-"+tag {
			out = append(out, s)
		}
	}
	return out
}

// waitFor polls Inspect until ok holds or a deadline passes.
func waitFor(t *testing.T, d driver.Driver, id, what string, ok func(driver.Status) bool) driver.Status {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := d.Inspect(callCtx(t), id)
		if err != nil {
			t.Fatalf("Inspect while waiting for %s: %v", what, err)
		}
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s not %s after 30s: %+v", id, what, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func removeLater(t *testing.T, d driver.Driver, id string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if err := d.Remove(ctx, id); err != nil {
			t.Errorf("cleanup: Remove(%s): %v", id, err)
		}
	})
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

func token() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func missingImage() string { return "genesis-conformance/missing:" + token() }

// tinyTar is a root filesystem with a single directory.
func tinyTar(t *testing.T) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777, ModTime: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
