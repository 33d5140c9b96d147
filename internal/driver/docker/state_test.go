package docker_test

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/driver/docker"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/testenv"
)

// ticker prints an increasing count to stdout every 200 ms after writing a
// marker into the root filesystem.
var ticker = []string{"/bin/busybox", "sh", "-c",
	"echo changed > /etc/marker; i=0; while :; do i=$((i+1)); echo tick$i; /bin/busybox sleep 0.2; done"}

// lastTick is the highest tickN in a container's stdout so far.
func lastTick(t *testing.T, d *docker.Driver, id string) int {
	t.Helper()
	out, _, err := d.Logs(t.Context(), id)
	if err != nil {
		t.Fatalf("Logs: %v", err)
	}
	n := 0
	for _, f := range strings.Fields(string(out)) {
		if v, err := strconv.Atoi(strings.TrimPrefix(f, "tick")); err == nil && v > n {
			n = v
		}
	}
	return n
}

// waitTick waits until a container's count passes above.
func waitTick(t *testing.T, d *docker.Driver, id string, above int) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n := lastTick(t, d, id); n > above {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s: the count did not pass %d", id, above)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPauseUnpause freezes a counting container under each runtime: while
// paused it counts nothing and reports paused; unpaused it counts on.
func TestPauseUnpause(t *testing.T) {
	d := testenv.Docker(t)
	img := testenv.BusyboxImage(t, d)
	for _, rt := range testenv.Runtimes(t, d) {
		t.Run(string(rt), func(t *testing.T) {
			t.Parallel()
			id := run(t, d, driver.Spec{Image: img, Runtime: rt, Cmd: ticker})
			waitTick(t, d, id, 1)
			if err := d.Pause(t.Context(), id); err != nil {
				t.Fatal(err)
			}
			if err := d.Pause(t.Context(), id); err != nil {
				t.Errorf("pausing a paused container: %v", err)
			}
			st, err := d.Inspect(t.Context(), id)
			if err != nil || st.State != "paused" {
				t.Fatalf("paused container: %+v %v", st, err)
			}
			frozen := lastTick(t, d, id)
			// Nothing can prove a negative without waiting: a second is
			// five ticks of a running container.
			time.Sleep(time.Second)
			if n := lastTick(t, d, id); n > frozen+1 {
				t.Errorf("a paused container counted from %d to %d", frozen, n)
			}
			if err := d.Unpause(t.Context(), id); err != nil {
				t.Fatal(err)
			}
			waitTick(t, d, id, frozen+2)
		})
	}
}

// TestCheckpointRestore saves a counting runsc container leaving it
// running, restores the image in a new container (which counts on from
// where it was saved, its root filesystem change kept), and saves the root
// filesystem changes alone as a tar that a fresh container starts on.
func TestCheckpointRestore(t *testing.T) {
	d := testenv.Docker(t)
	img := testenv.BusyboxImage(t, d)
	rts, err := d.RegisteredRuntimes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(testenv.Runtimes(t, d), sandbox.RuntimeRunsc) || rts[driver.RestoreRuntime] == "" {
		t.Skipf("runsc and %s are not both registered (scripts/host-setup.sh)", driver.RestoreRuntime)
	}
	src := run(t, d, driver.Spec{Image: img, Runtime: sandbox.RuntimeRunsc, Cmd: ticker})
	waitTick(t, d, src, 2)
	image := t.TempDir()
	if err := d.Checkpoint(t.Context(), src, driver.CheckpointOptions{ImagePath: image, LeaveRunning: true}); err != nil {
		t.Fatal(err)
	}
	saved := lastTick(t, d, src)
	waitTick(t, d, src, saved) // it runs on
	for _, f := range []string{"checkpoint.img", "pages.img"} {
		if _, err := os.Stat(filepath.Join(image, f)); err != nil {
			t.Errorf("image: %v", err)
		}
	}

	t.Run("restore", func(t *testing.T) {
		id := run(t, d, driver.Spec{Image: img, Runtime: sandbox.RuntimeRunsc, Cmd: ticker, Restore: &driver.RestoreOrder{ImagePath: image}})
		// The restored process writes to the new container's stdout: its
		// first tick there is the one after the image's.
		n := waitTick(t, d, id, 0)
		out, _, _ := d.Logs(t.Context(), id)
		if strings.Contains(string(out), "tick1\n") && saved > 1 {
			t.Errorf("the restored container counted from 1: %q", out)
		}
		waitTick(t, d, id, n)
		if _, err := os.Stat(filepath.Join(driver.RestoreOrderDir, id+".json")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the restore order is left after the start: %v", err)
		}
	})

	t.Run("rootfs upper", func(t *testing.T) {
		tarPath := filepath.Join(t.TempDir(), "rootfs.tar")
		if err := d.SaveRootfsUpper(t.Context(), src, tarPath); err != nil {
			t.Fatal(err)
		}
		if !tarHas(t, tarPath, "etc/marker") {
			t.Fatalf("%s has no etc/marker", tarPath)
		}
		id := run(t, d, driver.Spec{Image: img, Runtime: sandbox.RuntimeRunsc, Cmd: []string{"/bin/busybox", "cat", "/etc/marker"},
			Restore: &driver.RestoreOrder{RootfsUpperTar: tarPath}})
		logsUntil(t, d, id, "changed")
	})

	t.Run("runc refuses", func(t *testing.T) {
		if !slices.Contains(testenv.Runtimes(t, d), sandbox.RuntimeRunc) {
			t.Skip("no runc")
		}
		id := run(t, d, driver.Spec{Image: img, Runtime: sandbox.RuntimeRunc, Cmd: ticker})
		err := d.Checkpoint(t.Context(), id, driver.CheckpointOptions{ImagePath: t.TempDir()})
		if !errors.Is(err, errdefs.ErrNotImplemented) {
			t.Errorf("checkpoint of a runc container: %v", err)
		}
	})
}

// TestCommitRootfs keeps a runc container's file changes as an image that
// a new container starts from, and says the size they take in it: a
// sparse file of 8 MiB takes all of it (the snapshots count it).
func TestCommitRootfs(t *testing.T) {
	d := testenv.Docker(t)
	img := testenv.BusyboxImage(t, d)
	cmd := slices.Clone(ticker)
	cmd[3] = "/bin/busybox truncate -s 8M /sparse && " + cmd[3]
	src := run(t, d, driver.Spec{Image: img, Runtime: sandbox.RuntimeRunc, Cmd: cmd})
	waitTick(t, d, src, 1)
	ref := "genesis-test/commit:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	mark := strconv.FormatInt(time.Now().UnixNano(), 36)
	layer, err := d.CommitRootfs(t.Context(), src, ref, map[string]string{testenv.LabelTest: "1", driver.LabelSnapshot: mark})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := d.RemoveImage(ctx, ref); err != nil {
			t.Errorf("remove %s: %v", ref, err)
		}
	})
	if layer < 8<<20 || layer > 9<<20 {
		t.Errorf("the committed layer takes %d bytes, want about 8 MiB", layer)
	}
	st, err := d.Inspect(t.Context(), src)
	if err != nil || st.State != "running" {
		t.Errorf("the source after the commit: %+v %v", st, err)
	}
	// The listing names the image by its reference and gives its labels
	// (the snapshots' sweep tells an image being tagged by its label).
	list, err := d.SavedImages(t.Context(), driver.LabelSnapshot+"="+mark)
	if err != nil || len(list) != 1 || !slices.Equal(list[0].Refs, []string{ref}) || list[0].Labels[driver.LabelSnapshot] != mark {
		t.Errorf("SavedImages after the commit: %+v %v, want %s labelled %s", list, err, ref, mark)
	}
	id := run(t, d, driver.Spec{Image: ref, Runtime: sandbox.RuntimeRunc, Cmd: []string{"/bin/busybox", "cat", "/etc/marker"}})
	logsUntil(t, d, id, "changed")
}

func tarHas(t *testing.T, path, name string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return false
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if strings.TrimPrefix(h.Name, "./") == name || strings.TrimPrefix(h.Name, "/") == name {
			return true
		}
	}
}
