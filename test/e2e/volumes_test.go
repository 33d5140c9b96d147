package e2e

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/mountinfo"
	"genesis.dev/sandbox/internal/testenv"
)

// apiStatus fails t unless err is an API error of status and code.
func apiStatus(t *testing.T, what string, err error, status int, code string) {
	t.Helper()
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != status || ae.Problem.Code != code {
		t.Errorf("%s: %v; want %d %s", what, err, status, code)
	}
}

// volumeMounts lists the mount points below the env's volumes dir.
func volumeMounts(t *testing.T, e *env) []string {
	t.Helper()
	mps, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	dir := filepath.Join(e.dataDir, "volumes") + "/"
	real, _ := filepath.EvalSymlinks(filepath.Join(e.dataDir, "volumes"))
	for _, mp := range mps {
		if strings.HasPrefix(mp, dir) || (real != "" && strings.HasPrefix(mp, real+"/")) {
			out = append(out, mp)
		}
	}
	return out
}

func readAll(t *testing.T, d *client.Download) string {
	t.Helper()
	defer d.Body.Close()
	b, err := io.ReadAll(d.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestVolumes covers named volumes under runc and runsc: a volume seeded
// through its files API is mounted writable into one sandbox, which
// writes to it; a second writer, a reader beside the writer, deleting it
// and snapshotting the sandbox are refused; writing past its size fails
// with ENOSPC inside and the volume stays usable; after the sandbox is
// gone its data is read through the API (with Range) and by two read-only
// sandboxes at once, which cannot write; a lease mounts it too and lets go
// when released; after a restart of the service the data is still there;
// another tenant sees none of it. Bad input is 400 and makes nothing.
func TestVolumes(t *testing.T) {
	t.Parallel()
	otherKey := "e2e_other_" + randomHex(t, 8)
	e := newEnv(t, "tenants:\n  other: {api_keys: [\""+otherKey+"\"]}\n")
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	// Every call has a deadline of its own (callCtx), never one budget
	// for the whole test: on a loaded host that budget ran out inside
	// whichever call came last (a job start, after 10 minutes of earlier
	// calls), which then looked like a call that hung.
	if _, err := c.ListVolumes(callCtx(t)); err != nil {
		var ae *client.APIError
		if errors.As(err, &ae) && ae.Status == http.StatusNotImplemented && os.Getenv("CI") != "true" {
			t.Skipf("volumes unavailable on this host: %v", err)
		}
		t.Fatal(err)
	}
	runtimes := e.runtimes(t)
	t.Cleanup(func() {
		// Volumes stay mounted while they exist; the test deletes them at
		// its end. After a failure, what is left is unmounted here, before
		// the env removes its data dir.
		for _, mp := range volumeMounts(t, e) {
			if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil {
				t.Errorf("unmounting a left volume %s: %v", mp, err)
			}
		}
	})

	t.Run("bad input", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			size int64
			code string
		}{
			{"../etc", 8, "invalid_volume_name"},
			{"a/b", 8, "invalid_volume_name"},
			{"", 8, "invalid_volume_name"},
			{"default", 8, "invalid_volume_name"},
			{"Caps", 8, "invalid_volume_name"},
			{"zero", 0, "invalid_volume_size"},
			{"huge", 1 << 40, "invalid_volume_size"},
		} {
			_, err := c.CreateVolume(callCtx(t), tc.name, tc.size)
			apiStatus(t, fmt.Sprintf("create %q %d", tc.name, tc.size), err, 400, tc.code)
		}
		if list, err := c.ListVolumes(callCtx(t)); err != nil || len(list) != 0 {
			t.Errorf("bad creates made volumes: %+v %v", list, err)
		}
		if _, err := c.CreateVolume(callCtx(t), "probe", 8); err != nil {
			t.Fatal(err)
		}
		before, err := c.ListSandboxes(callCtx(t), client.ListSandboxesOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			m      client.VolumeMount
			status int
			code   string
		}{
			{client.VolumeMount{Volume: "probe", Path: "/mnt/../etc"}, 400, "invalid_volume_mount"},
			{client.VolumeMount{Volume: "probe", Path: "/etc/probe"}, 400, "invalid_volume_mount"},
			{client.VolumeMount{Volume: "probe", Path: "/.genesis/x"}, 400, "invalid_volume_mount"},
			{client.VolumeMount{Volume: "probe", Path: "/workspace"}, 400, "invalid_volume_mount"},
			{client.VolumeMount{Volume: "probe", Path: "mnt/probe"}, 400, "invalid_volume_mount"},
			{client.VolumeMount{Volume: "../probe", Path: "/mnt/probe"}, 400, "invalid_volume_name"},
			{client.VolumeMount{Volume: "missing", Path: "/mnt/probe"}, 404, "volume_not_found"},
		} {
			_, err := c.CreateSandbox(callCtx(t), client.CreateSandboxRequest{Profile: "tool-basic", Volumes: []client.VolumeMount{tc.m}}, "")
			apiStatus(t, fmt.Sprintf("mount %+v", tc.m), err, tc.status, tc.code)
		}
		if after, err := c.ListSandboxes(callCtx(t), client.ListSandboxesOptions{}); err != nil || len(after.Items) != len(before.Items) {
			t.Errorf("refused creates made sandboxes: %d before, %d after (%v)", len(before.Items), len(after.Items), err)
		}
		for _, p := range []string{"../x", "/../../etc/passwd", "a/../../x"} {
			_, err := c.WriteVolumeFile(callCtx(t), "probe", p, strings.NewReader("x"), client.WriteFileOptions{})
			apiStatus(t, "upload to "+p, err, 400, "invalid_path")
		}
		if l, err := c.ListVolumeFiles(callCtx(t), "probe", "/", 0); err != nil || len(l.Entries) != 0 {
			t.Errorf("bad uploads wrote: %+v %v", l, err)
		}
		if err := c.DeleteVolume(callCtx(t), "probe"); err != nil {
			t.Fatal(err)
		}
		if err := c.DeleteVolume(callCtx(t), "probe"); err != nil {
			t.Errorf("delete of a deleted volume: %v", err)
		}
	})

	t.Run("use", func(t *testing.T) {
		for _, rt := range runtimes {
			t.Run(rt, func(t *testing.T) {
				t.Parallel()
				name := "data-" + rt
				mnt := "/mnt/" + name
				if _, err := c.CreateVolume(callCtx(t), name, 16); err != nil {
					t.Fatal(err)
				}
				if _, err := c.WriteVolumeFile(callCtx(t), name, "/seed/seed.txt", strings.NewReader("seeded"), client.WriteFileOptions{}); err != nil {
					t.Fatal(err)
				}
				w := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt,
					Volumes: []client.VolumeMount{{Volume: name, Path: mnt}}})
				res := execOK(t, c, w.ID, "cat "+mnt+"/seed/seed.txt && echo written > "+mnt+"/from-sandbox.txt && mkdir -p "+mnt+"/dir && echo deep > "+mnt+"/dir/deep.txt && stat -c %u "+mnt)
				if res.ExitCode != 0 || res.Stdout != "seeded1000\n" {
					t.Fatalf("writer: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
				}
				if rt == "runc" {
					res := execOK(t, c, w.ID, "grep ' "+mnt+" ' /proc/mounts")
					if !strings.Contains(res.Stdout, "nosuid") || !strings.Contains(res.Stdout, "nodev") || !strings.Contains(res.Stdout, " rw,") {
						t.Errorf("the volume's mount inside: %q, want rw,nosuid,nodev", res.Stdout)
					}
				}

				// One writer or many readers; a mounted volume stays.
				_, err := c.CreateSandbox(callCtx(t), client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt, Volumes: []client.VolumeMount{{Volume: name, Path: mnt}}}, "")
				apiStatus(t, "a second writer", err, 409, "volume_busy")
				_, err = c.CreateSandbox(callCtx(t), client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt, Volumes: []client.VolumeMount{{Volume: name, Path: mnt, ReadOnly: true}}}, "")
				apiStatus(t, "a reader beside the writer", err, 409, "volume_busy")
				apiStatus(t, "delete while mounted", c.DeleteVolume(callCtx(t), name), 409, "volume_in_use")
				_, err = c.WriteVolumeFile(callCtx(t), name, "/x", strings.NewReader("x"), client.WriteFileOptions{})
				apiStatus(t, "upload beside the writer", err, 409, "volume_busy")
				_, err = c.CreateSnapshot(callCtx(t), w.ID, client.CreateSnapshotRequest{})
				apiStatus(t, "snapshot of a sandbox with a volume", err, 409, "sandbox_has_volumes")
				if ae := (*client.APIError)(nil); errors.As(err, &ae) && !strings.Contains(ae.Problem.Detail, "rollback") {
					t.Errorf("the refusal %q does not say that rollback is refused too", ae.Problem.Detail)
				}
				if v, err := c.GetVolume(callCtx(t), name); err != nil || len(v.Mounts) != 1 || v.Mounts[0].SandboxID != w.ID || v.Mounts[0].ReadOnly {
					t.Errorf("holders while mounted: %+v %v", v, err)
				}

				// Its size is a hard limit; the volume stays usable.
				res = execOK(t, c, w.ID, "dd if=/dev/zero of="+mnt+"/big bs=1M count=64")
				if res.ExitCode == 0 || !strings.Contains(res.Stderr, "No space left on device") {
					t.Errorf("writing 64 MiB into 16: exit %d %q; want ENOSPC", res.ExitCode, res.Stderr)
				}
				if res := execOK(t, c, w.ID, "rm "+mnt+"/big && echo fine > "+mnt+"/after.txt && cat "+mnt+"/after.txt"); res.ExitCode != 0 || res.Stdout != "fine\n" {
					t.Errorf("after the full write: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
				}
				// The API's used bytes follow what the sandbox writes.
				v, err := c.GetVolume(callCtx(t), name)
				if err != nil || v.UsedBytes == nil {
					t.Fatalf("used bytes of a mounted volume: %+v %v", v, err)
				}
				before := *v.UsedBytes
				if res := execOK(t, c, w.ID, "dd if=/dev/zero of="+mnt+"/used bs=1M count=4 && sync"); res.ExitCode != 0 {
					t.Fatalf("writing 4 MiB: exit %d %q", res.ExitCode, res.Stderr)
				}
				eventually(t, 30*time.Second, "used_bytes to count the sandbox's 4 MiB", func() (bool, string) {
					v, err := c.GetVolume(callCtx(t), name)
					if err != nil || v.UsedBytes == nil {
						return false, fmt.Sprintf("%+v %v", v, err)
					}
					return *v.UsedBytes-before >= 4<<20 && *v.UsedBytes <= 16<<20, fmt.Sprintf("used %d, was %d", *v.UsedBytes, before)
				})
				if res := execOK(t, c, w.ID, "rm "+mnt+"/used"); res.ExitCode != 0 {
					t.Errorf("rm: %q", res.Stderr)
				}

				if err := c.DeleteSandbox(callCtx(t), w.ID); err != nil {
					t.Fatal(err)
				}
				if v, err := c.GetVolume(callCtx(t), name); err != nil || len(v.Mounts) != 0 {
					t.Errorf("holders after the writer's delete: %+v %v", v, err)
				}
				// Its writes are on the volume, read without any sandbox.
				d, err := c.ReadVolumeFile(callCtx(t), name, "/from-sandbox.txt", nil)
				if err != nil || readAll(t, d) != "written\n" {
					t.Errorf("download of the sandbox's file: %v", err)
				}
				d, err = c.ReadVolumeFile(callCtx(t), name, "dir/deep.txt", &client.ByteRange{Offset: 1, Length: 2})
				if err != nil {
					t.Fatal(err)
				}
				if got := readAll(t, d); d.Status != http.StatusPartialContent || got != "ee" {
					t.Errorf("range download: %d %q", d.Status, got)
				}

				// Many readers; none can write.
				var readers []string
				for range 2 {
					r := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt,
						Volumes: []client.VolumeMount{{Volume: name, Path: "/workspace/data", ReadOnly: true}}})
					readers = append(readers, r.ID)
					if res := execOK(t, c, r.ID, "cat /workspace/data/from-sandbox.txt /workspace/data/after.txt"); res.Stdout != "written\nfine\n" {
						t.Errorf("reader: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
					}
					res := execOK(t, c, r.ID, "echo no > /workspace/data/no.txt")
					if res.ExitCode == 0 || !strings.Contains(res.Stderr, "Read-only file system") {
						t.Errorf("write on a read-only mount: exit %d %q", res.ExitCode, res.Stderr)
					}
				}
				_, err = c.CreateSandbox(callCtx(t), client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt, Volumes: []client.VolumeMount{{Volume: name, Path: mnt}}}, "")
				apiStatus(t, "a writer beside readers", err, 409, "volume_busy")
				for _, id := range readers {
					if err := c.DeleteSandbox(callCtx(t), id); err != nil {
						t.Fatal(err)
					}
				}

				// A lease mounts it (cold) and lets go when released.
				l, err := c.AcquireLease(callCtx(t), client.AcquireLeaseRequest{Profile: "tool-basic", Runtime: rt,
					Volumes: []client.VolumeMount{{Volume: name, Path: mnt}}})
				if err != nil {
					t.Fatal(err)
				}
				e.deleteOnCleanup(t, l.SandboxID)
				if res := execOK(t, c, l.SandboxID, "echo leased >> "+mnt+"/from-sandbox.txt"); res.ExitCode != 0 {
					t.Errorf("write from the lease: %q", res.Stderr)
				}
				if err := c.ReleaseLease(callCtx(t), l.LeaseID); err != nil {
					t.Fatal(err)
				}
				eventually(t, 30*time.Second, "the lease's hold released", func() (bool, string) {
					v, err := c.GetVolume(callCtx(t), name)
					if err != nil {
						return false, err.Error()
					}
					return len(v.Mounts) == 0, fmt.Sprintf("holders %+v", v.Mounts)
				})
			})
		}
	})
	if t.Failed() {
		return
	}

	// The data survives a crash of the service in the middle of a write
	// of another file: a writer keeps appending while the service is
	// killed; after the restart the other files are whole, and deleting
	// the writer (adopted by the new process) lets go of the volume.
	var writers []string
	for _, rt := range runtimes {
		name := "data-" + rt
		w := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt,
			Volumes: []client.VolumeMount{{Volume: name, Path: "/mnt/v"}}})
		writers = append(writers, w.ID)
		if _, err := c.StartJob(callCtx(t), w.ID, client.ExecRequest{Script: "while true; do echo 0123456789 >> /mnt/v/stream.txt; done", Background: true}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "the writer writing", func() (bool, string) {
			res := execOK(t, c, w.ID, "test -s /mnt/v/stream.txt && echo yes")
			return res.Stdout == "yes\n", res.Stdout + res.Stderr
		})
	}
	svc.kill(t)
	svc = e.start(t)
	c = svc.client()
	for i, rt := range runtimes {
		name := "data-" + rt
		d, err := c.ReadVolumeFile(callCtx(t), name, "from-sandbox.txt", nil)
		if err != nil || readAll(t, d) != "written\nleased\n" {
			t.Errorf("%s: the other file after a crash mid-write: %v", rt, err)
		}
		if err := c.DeleteSandbox(callCtx(t), writers[i]); err != nil {
			t.Fatal(err)
		}
		if v, err := c.GetVolume(callCtx(t), name); err != nil || len(v.Mounts) != 0 {
			t.Errorf("%s: holders after the adopted writer's delete: %+v %v", rt, v, err)
		}
	}

	// The data survives a restart of the service.
	svc.stop(t)
	svc = e.start(t)
	c = svc.client()
	for _, rt := range runtimes {
		name := "data-" + rt
		r := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt,
			Volumes: []client.VolumeMount{{Volume: name, Path: "/mnt/v", ReadOnly: true}}})
		if res := execOK(t, c, r.ID, "cat /mnt/v/from-sandbox.txt /mnt/v/seed/seed.txt"); res.Stdout != "written\nleased\nseeded" {
			t.Errorf("%s after a restart: exit %d %q %q", rt, res.ExitCode, res.Stdout, res.Stderr)
		}
		if err := c.DeleteSandbox(callCtx(t), r.ID); err != nil {
			t.Fatal(err)
		}
	}

	// Another tenant sees none of it and has names of its own.
	oc := client.New(svc.url(), otherKey)
	name := "data-" + runtimes[0]
	_, err := oc.GetVolume(callCtx(t), name)
	apiStatus(t, "another tenant's get", err, 404, "volume_not_found")
	_, err = oc.ReadVolumeFile(callCtx(t), name, "/from-sandbox.txt", nil)
	apiStatus(t, "another tenant's download", err, 404, "volume_not_found")
	_, err = oc.CreateSandbox(callCtx(t), client.CreateSandboxRequest{Profile: "tool-basic", Volumes: []client.VolumeMount{{Volume: name, Path: "/mnt/x", ReadOnly: true}}}, "")
	apiStatus(t, "another tenant's mount", err, 404, "volume_not_found")
	if list, err := oc.ListVolumes(callCtx(t)); err != nil || len(list) != 0 {
		t.Errorf("another tenant's list: %+v %v", list, err)
	}
	if err := oc.DeleteVolume(callCtx(t), name); err != nil {
		t.Errorf("another tenant's delete (of a volume it does not have): %v", err)
	}
	if _, err := c.GetVolume(callCtx(t), name); err != nil {
		t.Errorf("the other tenant's delete reached ours: %v", err)
	}
	if _, err := oc.CreateVolume(callCtx(t), name, 4); err != nil {
		t.Errorf("another tenant, the same name: %v", err)
	}
	if err := oc.DeleteVolume(callCtx(t), name); err != nil {
		t.Error(err)
	}

	// Deleting the volumes unmounts and removes them.
	for _, rt := range runtimes {
		if err := c.DeleteVolume(callCtx(t), "data-"+rt); err != nil {
			t.Errorf("delete volume: %v", err)
		}
	}
	if left := volumeMounts(t, e); len(left) > 0 {
		t.Errorf("volume filesystems still mounted after their delete: %v", left)
	}
	if entries, err := os.ReadDir(filepath.Join(e.dataDir, "volumes")); err != nil || len(entries) != 0 {
		t.Errorf("the volumes dir after every delete: %d entries, %v", len(entries), err)
	}
}

// TestVolumeCLI drives volumes through the genesis binary: create, copy a
// file in, mount it with sandbox create --volume (read-only: the sandbox
// reads it and cannot write), rm refused while mounted, copy out, rm.
func TestVolumeCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	t.Cleanup(func() {
		for _, mp := range volumeMounts(t, e) {
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	})
	if r := svc.cli(t, "volume", "create", "cli-vol", "--size-mb", "8"); r.code != 0 || r.stdout != "cli-vol\n" {
		if strings.Contains(r.stderr, "volumes_unavailable") && os.Getenv("CI") != "true" {
			t.Skip(r.stderr)
		}
		t.Fatal(r)
	}
	local := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(local, []byte("from the host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := svc.cli(t, "volume", "cp", local, "cli-vol:docs/"); r.code != 0 {
		t.Fatal(r)
	}
	r := svc.cli(t, "sandbox", "create", "--profile", "tool-basic", "--volume", "cli-vol:/mnt/docs:ro")
	if r.code != 0 {
		t.Fatal(r)
	}
	id := strings.TrimSpace(r.stdout)
	e.deleteOnCleanup(t, id)
	res := execOK(t, svc.client(), id, "cat /mnt/docs/docs/notes.txt; touch /mnt/docs/x")
	if res.Stdout != "from the host\n" || res.ExitCode == 0 {
		t.Errorf("inside: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if r := svc.cli(t, "volume", "ls"); r.code != 0 || !strings.Contains(r.stdout, id+":/mnt/docs:ro") {
		t.Errorf("ls does not show the reader: %v", r)
	}
	if r := svc.cli(t, "volume", "rm", "cli-vol"); r.code != 1 || !strings.Contains(r.stderr, "volume_in_use") {
		t.Errorf("rm while mounted: %v", r)
	}
	if r := svc.cli(t, "sandbox", "create", "--profile", "tool-basic", "--volume", "cli-vol"); r.code != 2 {
		t.Errorf("a --volume without a path: %v", r)
	}
	if r := svc.cli(t, "sandbox", "rm", id); r.code != 0 {
		t.Fatal(r)
	}
	if r := svc.cli(t, "volume", "cp", "cli-vol:docs/notes.txt", "-"); r.code != 0 || r.stdout != "from the host\n" {
		t.Errorf("cp out: %v", r)
	}
	if r := svc.cli(t, "volume", "rm", "cli-vol"); r.code != 0 {
		t.Error(r)
	}
	if left := volumeMounts(t, e); len(left) > 0 {
		t.Errorf("mounted after rm: %v", left)
	}
}

// TestOpenSandboxVolumes drives the unmodified OpenSandbox SDK's volume
// mounts (the pvc backend: a named volume, made by the first create with
// its storage request) under runc and runsc: a writer, a second writer
// refused, a read-only reader after the writer is gone, a host path
// refused; the volume is then one of the tenant's, with the file written
// inside.
func TestOpenSandboxVolumes(t *testing.T) {
	t.Parallel()
	root := testenv.ModuleRoot(t)
	if _, err := os.Stat(filepath.Join(root, "test", "osclient", "node_modules", "@alibaba-group", "opensandbox")); err != nil {
		t.Fatalf("the OpenSandbox SDK is not installed (make test-deps): %v", err)
	}
	untrusted := "e2e_" + randomHex(t, 16)
	e := newEnv(t, openSandboxConfig(untrusted))
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	t.Cleanup(func() {
		for _, mp := range volumeMounts(t, e) {
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	})
	keys := map[string]string{"runc": e.apiKey, "runsc": untrusted}
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			name := "os-" + rt
			out := runOpenSandboxFlow(t, svc.url(), keys[rt], "ubuntu", "volumes", name)
			c := client.New(svc.url(), keys[rt])
			for _, id := range []string{fmt.Sprint(out["id"]), fmt.Sprint(out["readerId"])} {
				if sb, err := c.GetSandbox(callCtx(t), id); err != nil || sb.Runtime != rt {
					t.Errorf("sandbox %s: %+v %v, want one under %s", id, sb, err, rt)
				}
			}
			want := map[string]any{
				"write":   []any{"from-sdk"},
				"read":    []any{"from-sdk"},
				"roWrite": []any{"touch: cannot touch '/mnt/data/x': Read-only file system", "refused"},
			}
			for k, v := range want {
				if got := out[k]; fmt.Sprint(got) != fmt.Sprint(v) {
					t.Errorf("%s: got %#v, want %#v", k, got, v)
				}
			}
			if s, _ := out["second"].(map[string]any); s["status"] != float64(409) {
				t.Errorf("a second writer: %v, want a 409", out["second"])
			}
			if h, _ := out["host"].(map[string]any); h["status"] != float64(400) {
				t.Errorf("a host path: %v, want a 400", out["host"])
			}
			ctx := callCtx(t)
			v, err := c.GetVolume(ctx, name)
			if err != nil || v.SizeMB != 16 {
				t.Fatalf("the volume the create made: %+v %v", v, err)
			}
			d, err := c.ReadVolumeFile(ctx, name, "sdk.txt", nil)
			if err != nil || readAll(t, d) != "from-sdk\n" {
				t.Errorf("the file through the volumes API: %v", err)
			}
			eventually(t, 30*time.Second, "holds released after the kills", func() (bool, string) {
				v, err := c.GetVolume(ctx, name)
				if err != nil {
					return false, err.Error()
				}
				return len(v.Mounts) == 0, fmt.Sprintf("%+v", v.Mounts)
			})
			if err := c.DeleteVolume(ctx, name); err != nil {
				t.Error(err)
			}
		})
	}
}
