package docker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/driver/docker"
	"genesis.dev/sandbox/internal/driver/drivertest"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/testenv"
)

var testLabels = map[string]string{testenv.LabelTest: "1"}

func TestConformance(t *testing.T) {
	drivertest.Run(t, func(t *testing.T) drivertest.Harness {
		d := testenv.Docker(t)
		return drivertest.Harness{
			Driver:      d,
			Image:       testenv.BusyboxImage(t, d),
			Runtimes:    testenv.Runtimes(t, d),
			Cmd:         []string{"/bin/busybox", "sleep", "300"},
			Labels:      testLabels,
			RemoveImage: d.RemoveImage,
		}
	})
}

// run creates and starts a container from spec and removes it at cleanup.
func run(t *testing.T, d *docker.Driver, spec driver.Spec) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if spec.Labels == nil {
		spec.Labels = map[string]string{}
	}
	for k, v := range testLabels {
		spec.Labels[k] = v
	}
	id, err := d.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := d.Remove(ctx, id); err != nil {
			t.Errorf("cleanup: Remove(%s): %v", id, err)
		}
	})
	if err := d.Start(ctx, id); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return id
}

// logsUntil polls the container's stdout until it contains marker.
func logsUntil(t *testing.T, d *docker.Driver, id, marker string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, errOut, err := d.Logs(t.Context(), id)
		if err != nil {
			t.Fatalf("Logs: %v", err)
		}
		if bytes.Contains(out, []byte(marker)) {
			return string(out)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in logs after 30s; stdout %q stderr %q", marker, out, errOut)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestHardening(t *testing.T) {
	d := testenv.Docker(t)
	image := testenv.BusyboxImage(t, d)
	for _, rt := range testenv.Runtimes(t, d) {
		t.Run(string(rt), func(t *testing.T) {
			t.Parallel()
			id := run(t, d, driver.Spec{
				Name:      "genesis-test-hardening-" + strings.TrimPrefix(sandbox.NewID("x"), "x_"),
				Image:     image,
				Runtime:   rt,
				User:      "1000:1000",
				Cmd:       []string{"/bin/busybox", "sh", "-c", "cat /proc/self/status; echo NETDEV; cat /proc/net/dev; echo LINKS; ip -o link; echo END; sleep 300"},
				Resources: sandbox.Resources{CPU: 0.5, MemoryMB: 96, Pids: 50},
				ReadOnly:  true,
				Tmpfs:     map[string]string{"/tmp": "size=16m"},
			})
			hc, user, err := d.InspectHostConfig(t.Context(), id)
			if err != nil {
				t.Fatalf("inspect: %v", err)
			}
			if fmt.Sprint(hc.CapDrop) != "[ALL]" || len(hc.CapAdd) != 0 {
				t.Errorf("CapDrop %v CapAdd %v; want [ALL] and none", hc.CapDrop, hc.CapAdd)
			}
			wantOpt := []string{"no-new-privileges:true"}
			if rt == sandbox.RuntimeRunc {
				wantOpt = append(wantOpt, docker.NativeSeccompOpt())
			}
			if !slices.Equal(hc.SecurityOpt, wantOpt) {
				t.Errorf("SecurityOpt = %.200q; want %.200q", hc.SecurityOpt, wantOpt)
			}
			if want := docker.HostPidsLimit(rt, 50); hc.PidsLimit == nil || *hc.PidsLimit != want {
				t.Errorf("PidsLimit = %v; want %d", hc.PidsLimit, want)
			}
			if hc.Memory != 96<<20 || hc.MemorySwap != hc.Memory {
				t.Errorf("Memory %d MemorySwap %d; want both %d", hc.Memory, hc.MemorySwap, 96<<20)
			}
			if hc.NanoCpus != 5e8 || hc.NetworkMode != "none" || !hc.ReadonlyRootfs || hc.Privileged || hc.Runtime != string(rt) {
				t.Errorf("NanoCpus %d NetworkMode %q ReadonlyRootfs %v Privileged %v Runtime %q", hc.NanoCpus, hc.NetworkMode, hc.ReadonlyRootfs, hc.Privileged, hc.Runtime)
			}
			if hc.Init == nil || *hc.Init {
				t.Errorf("Init = %v; want false", hc.Init)
			}
			if user != "1000:1000" {
				t.Errorf("User = %q", user)
			}

			out := logsUntil(t, d, id, "END")
			wants := []string{"CapEff:\t0000000000000000", "CapPrm:\t0000000000000000", "NoNewPrivs:\t1", "Uid:\t1000"}
			if rt == sandbox.RuntimeRunc {
				wants = append(wants, "Seccomp:\t2") // the filter is in force
			}
			for _, want := range wants {
				if !strings.Contains(out, want) {
					t.Errorf("/proc/self/status lacks %q:\n%s", want, out)
				}
			}
			netdev, links, _ := strings.Cut(strings.SplitN(out, "NETDEV", 2)[1], "LINKS")
			for _, line := range strings.Split(netdev, "\n") {
				name, _, ok := strings.Cut(line, ":")
				if name = strings.TrimSpace(name); ok && name != "lo" && !strings.Contains(name, "|") {
					t.Errorf("/proc/net/dev has interface %q besides lo:\n%s", name, netdev)
				}
			}
			links, _, _ = strings.Cut(links, "END")
			for _, line := range strings.Split(strings.TrimSpace(links), "\n") {
				if f := strings.Fields(line); len(f) < 2 || f[1] != "lo:" {
					t.Errorf("ip link shows %q; want only lo", line)
				}
			}
		})
	}
}

func TestProbe(t *testing.T) {
	d := testenv.DockerWithAgent(t)
	rts := testenv.Runtimes(t, d)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	p, err := d.Probe(ctx)
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if !p.Healthy || p.Error != "" || p.DaemonVersion == "" || p.APIVersion == "" || p.CgroupVersion == "" || p.CheckedAt.IsZero() {
		t.Errorf("probe = %+v; want healthy with daemon facts", p)
	}
	for _, rt := range rts {
		ri, ok := p.Runtime(rt)
		if !ok || !ri.Healthy || ri.Version == "" || ri.SmokeMS <= 0 || ri.Path == "" {
			t.Errorf("runtime %s: %+v (found %v); want healthy with version, path, smoke time", rt, ri, ok)
		}
		if rt == sandbox.RuntimeRunsc && !strings.Contains(ri.Version, "gvisor") {
			t.Errorf("runsc kernel %q does not contain gvisor", ri.Version)
		}
	}
	if p.DiskQuota.Method != "loop-ext4" || (!p.DiskQuota.Supported && p.DiskQuota.Reason == "") {
		t.Errorf("DiskQuota = %+v", p.DiskQuota)
	}
	if !p.Checkpoint.Supported && p.Checkpoint.Reason == "" {
		t.Errorf("Checkpoint unsupported without reason: %+v", p.Checkpoint)
	}
	// What each runtime keeps: pause and files on both, processes and
	// memory under runsc only (a smoke save and restore decided it).
	registered, err := d.RegisteredRuntimes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range rts {
		ri, _ := p.Runtime(rt)
		f := ri.Features
		if !f.Pause.Supported || !f.FSSnapshot.Supported && f.FSSnapshot.Reason == "" {
			t.Errorf("runtime %s features %+v", rt, f)
		}
		switch {
		case rt == sandbox.RuntimeRunc && (f.MemoryCheckpoint.Supported || f.MemoryCheckpoint.Reason == "" || !f.FSSnapshot.Supported):
			t.Errorf("runc features %+v: want files only, with a reason for memory", f)
		case rt == sandbox.RuntimeRunsc && registered[driver.RestoreRuntime] != "" &&
			(!f.MemoryCheckpoint.Supported || !strings.Contains(f.MemoryCheckpoint.Method, "smoke restore") || !p.Checkpoint.Supported):
			t.Errorf("runsc features %+v: want memory checkpoints, proved by a smoke restore", f)
		}
	}
}

func TestProbeWithoutAgentReportsRuntimesUnhealthy(t *testing.T) {
	d := testenv.Docker(t)
	p, err := d.Probe(t.Context())
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if p.Healthy || p.Error == "" || len(p.Runtimes) == 0 {
		t.Errorf("probe without agent = %+v; want unhealthy with an error and listed runtimes", p)
	}
	for _, r := range p.Runtimes {
		if r.Healthy || !strings.Contains(r.Error, "agent") {
			t.Errorf("runtime %+v: want unhealthy naming the agent", r)
		}
	}
}

func TestExpiredContextFailsFast(t *testing.T) {
	d := testenv.Docker(t)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	start := time.Now()
	_, err := d.Inspect(ctx, "anything")
	if !errors.Is(err, errdefs.ErrDeadlineExceeded) {
		t.Errorf("Inspect with expired ctx: %v; want ErrDeadlineExceeded", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("took %v; want fast", el)
	}
}

func TestRealErrorClasses(t *testing.T) {
	d := testenv.Docker(t)
	image := testenv.BusyboxImage(t, d)
	ctx := t.Context()
	if _, err := d.Inspect(ctx, "genesis-test-nope-"+strings.TrimPrefix(sandbox.NewID("x"), "x_")); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Inspect missing: %v; want ErrNotFound", err)
	}
	_, err := d.Create(ctx, driver.Spec{Image: image, Runtime: "no-such-runtime", Cmd: []string{"/bin/true"}, Labels: testLabels})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || errdefs.Code(err) != "runtime_unavailable" {
		t.Errorf("Create with unknown runtime: %v (code %q); want FailedPrecondition runtime_unavailable", err, errdefs.Code(err))
	}
	_, err = d.Create(ctx, driver.Spec{Image: image, Cmd: []string{"/bin/true"}, CapAdd: []string{"NOT_A_CAP"}, Labels: testLabels})
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Create with bad capability: %v; want ErrInvalidArgument", err)
	}
	if _, err := d.Inspect(ctx, "../etc"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("Inspect with path id: %v; want ErrInvalidArgument", err)
	}
}

func TestStoppedContainerReportsExit(t *testing.T) {
	d := testenv.Docker(t)
	image := testenv.BusyboxImage(t, d)
	id := run(t, d, driver.Spec{Image: image, Cmd: []string{"/bin/busybox", "sh", "-c", "exit 7"}})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	code, err := d.Wait(ctx, id)
	if err != nil || code != 7 {
		t.Fatalf("Wait = %d, %v; want 7", code, err)
	}
	st, err := d.Inspect(ctx, id)
	if err != nil || st.Running || st.ExitCode != 7 || st.State != "exited" || st.OOMKilled {
		t.Errorf("Inspect = %+v, %v; want exited with 7", st, err)
	}
}

func TestHostPidsLimit(t *testing.T) {
	t.Parallel()
	if got := docker.HostPidsLimit(sandbox.RuntimeRunc, 64); got != 64 {
		t.Errorf("runc: %d, want the limit itself", got)
	}
	if got := docker.HostPidsLimit(sandbox.RuntimeRunsc, 64); got != 192 {
		t.Errorf("runsc: %d, want 2*64+64", got)
	}
}
