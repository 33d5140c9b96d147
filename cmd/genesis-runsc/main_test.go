package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestPlan(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const id = "0123abcd"
	if err := os.WriteFile(filepath.Join(dir, id+".json"), []byte(`{"image_path":"/snap/memory"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.json"), []byte(`{`), 0o600); err != nil {
		t.Fatal(err)
	}
	global := []string{"--host-uds=create", "--root", "/run/docker/runtime-runc/moby", "--log", "/x/log.json", "--log-format", "json"}
	for _, tc := range []struct {
		name string
		args []string
		want []string
		err  bool
	}{
		{"start with an order", append(slices.Clone(global), "start", id),
			append(slices.Clone(global), "restore", "--detach", "--image-path", "/snap/memory", id), false},
		{"start without one", append(slices.Clone(global), "start", "other"), append(slices.Clone(global), "start", "other"), false},
		{"create is passed on", append(slices.Clone(global), "create", "--bundle", "/b", id), append(slices.Clone(global), "create", "--bundle", "/b", id), false},
		{"other calls are passed on", append(slices.Clone(global), "state", id), append(slices.Clone(global), "state", id), false},
		{"a bad order fails", append(slices.Clone(global), "start", "bad"), nil, true},
		{"no path tricks", append(slices.Clone(global), "start", "../"+id), append(slices.Clone(global), "start", "../"+id), false},
	} {
		got, err := plan(tc.args, dir)
		if (err != nil) != tc.err || (!tc.err && !slices.Equal(got, tc.want)) {
			t.Errorf("%s: %q %v; want %q (error %v)", tc.name, got, err, tc.want, tc.err)
		}
	}
}

func TestOwnFlags(t *testing.T) {
	t.Parallel()
	runsc, dir, rest := ownFlags([]string{"--genesis-runsc=/usr/local/bin/runsc", "--genesis-restore-dir=/tmp/r", "--host-uds=create", "start", "x"})
	if runsc != "/usr/local/bin/runsc" || dir != "/tmp/r" || !slices.Equal(rest, []string{"--host-uds=create", "start", "x"}) {
		t.Errorf("ownFlags: %q %q %q", runsc, dir, rest)
	}
}

func TestPlanAnnotatesTheBundle(t *testing.T) {
	t.Parallel()
	dir, bundle := t.TempDir(), t.TempDir()
	const id = "c0ffee"
	if err := os.WriteFile(filepath.Join(dir, id+".json"), []byte(`{"rootfs_upper_tar":"/snap/rootfs.tar"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := `{"ociVersion":"1.0.2","process":{"args":["sh"]},"annotations":{"a":"b"}}`
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--root", "/r", "create", "--bundle", bundle, "--pid-file", "/p", id}
	got, err := plan(args, dir)
	if err != nil || !slices.Equal(got, append([]string{"--allow-rootfs-tar-annotation"}, args...)) {
		t.Fatalf("create: %q %v", got, err)
	}
	b, _ := os.ReadFile(filepath.Join(bundle, "config.json"))
	var s struct {
		Process     map[string]any    `json:"process"`
		Annotations map[string]string `json:"annotations"`
	}
	if err := json.Unmarshal(b, &s); err != nil || s.Annotations["a"] != "b" || s.Annotations[rootfsUpperAnnotation] != "/snap/rootfs.tar" || s.Process["args"] == nil {
		t.Errorf("bundle spec after create: %s", b)
	}
	// Files only: the start is a start.
	start := []string{"--root", "/r", "start", id}
	if got, err := plan(start, dir); err != nil || !slices.Equal(got, start) {
		t.Errorf("start of a files-only order: %q %v", got, err)
	}
}
