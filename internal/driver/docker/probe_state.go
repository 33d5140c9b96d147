package docker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/sandbox"
)

// stateFeatures says what a runtime can do to keep a sandbox's state.
// Pause and files hold wherever the runtime runs; processes and memory
// only under runsc, with the runsc-restore runtime beside it, a network
// stack of gVisor's own (not the host's), and a smoke save and restore
// that worked (remembered per runsc binary and version).
func (d *Driver) stateFeatures(ctx context.Context, ri *driver.RuntimeInfo, info infoResponse) driver.RuntimeFeatures {
	var f driver.RuntimeFeatures
	if !ri.Healthy {
		why := "the runtime failed its smoke run"
		f.Pause, f.FSSnapshot, f.MemoryCheckpoint = driver.Feature{Reason: why}, driver.Feature{Reason: why}, driver.Feature{Reason: why}
		return f
	}
	_, restore := info.Runtimes[driver.RestoreRuntime]
	switch sandbox.Runtime(ri.Name) {
	case sandbox.RuntimeRunc:
		f.Pause = driver.Feature{Supported: true, Method: "cgroup freezer (docker pause)"}
		f.FSSnapshot = driver.Feature{Supported: true, Method: "docker commit of the root filesystem, a copy of the workspace"}
		f.MemoryCheckpoint = driver.Feature{Reason: "runc keeps no processes or memory here: that needs CRIU and an experimental Docker daemon, which this service does not use; use runsc"}
	case sandbox.RuntimeRunsc:
		f.Pause = driver.Feature{Supported: true, Method: "runsc pause (docker pause)"}
		switch {
		case d.cfg.Self != nil:
			why := "the service runs in a container: it drives runsc on the daemon's host only when it runs there"
			f.FSSnapshot, f.MemoryCheckpoint = driver.Feature{Reason: why}, driver.Feature{Reason: why}
		case !restore:
			why := fmt.Sprintf("the %s runtime is not registered with Docker (scripts/host-setup.sh registers it)", driver.RestoreRuntime)
			f.FSSnapshot, f.MemoryCheckpoint = driver.Feature{Reason: why}, driver.Feature{Reason: why}
		default:
			f.FSSnapshot = driver.Feature{Supported: true, Method: "runsc tar rootfs-upper, a copy of the workspace"}
			if slices.Contains(info.Runtimes[ri.Name].Args, "--network=host") {
				f.MemoryCheckpoint = driver.Feature{Reason: "runsc runs with --network=host (the fallback for an old runsc): a host network stack cannot be saved"}
			} else {
				f.MemoryCheckpoint = d.smokeCheckpoint(ctx, ri)
			}
		}
	default:
		why := "only runc and runsc are supported"
		f.Pause, f.FSSnapshot, f.MemoryCheckpoint = driver.Feature{Reason: why}, driver.Feature{Reason: why}, driver.Feature{Reason: why}
	}
	return f
}

// checkpointSmokes remembers smoke saves by runsc path and version.
var checkpointSmokes sync.Map // string → driver.Feature

// smokeCheckpoint saves a small runsc container (the agent listening on
// its loopback) and restores it into a new one through the runsc-restore
// runtime; the feature holds when the restored container runs.
func (d *Driver) smokeCheckpoint(ctx context.Context, ri *driver.RuntimeInfo) driver.Feature {
	key := ri.Path + "|" + ri.Version
	if f, ok := checkpointSmokes.Load(key); ok {
		return f.(driver.Feature)
	}
	f := d.runCheckpointSmoke(ctx, ri)
	if f.Supported || !strings.Contains(f.Reason, "deadline") {
		checkpointSmokes.Store(key, f) // a busy host's timeout is tried again
	}
	d.log.InfoContext(ctx, "probe: memory checkpoint", "runtime", ri.Name, "supported", f.Supported, "reason", f.Reason)
	return f
}

func (d *Driver) runCheckpointSmoke(ctx context.Context, ri *driver.RuntimeInfo) driver.Feature {
	ctx, cancel := context.WithTimeout(ctx, 2*d.cfg.ProbeTimeout)
	defer cancel()
	fail := func(step string, err error) driver.Feature {
		return driver.Feature{Reason: fmt.Sprintf("smoke save and restore failed at %s: %v", step, err)}
	}
	var tok [agentproto.TokenBytes]byte
	_, _ = rand.Read(tok[:])
	sum := sha256.Sum256(tok[:]) // nobody dials this agent: it only needs to be running
	spec := driver.Spec{
		Image:     ProbeImage,
		Runtime:   sandbox.RuntimeRunsc,
		Labels:    map[string]string{driver.LabelPurpose: "probe", driver.LabelRuntime: ri.Name},
		User:      "65534:65534",
		Env:       []string{agentproto.TokenSHA256Env + "=" + hex.EncodeToString(sum[:])},
		Cmd:       []string{driver.AgentBinary, "serve", "--listen", fmt.Sprintf("127.0.0.1:%d", agentproto.DefaultTCPPort)},
		Resources: sandbox.Resources{CPU: 1, MemoryMB: 128, Pids: 64},
		ReadOnly:  true,
		Mounts:    []driver.Mount{{Source: d.cfg.AgentDir, Target: driver.AgentMountDir, ReadOnly: true}},
	}
	name := func() string { return "genesis-probe-ckpt-" + strings.TrimPrefix(sandbox.NewID("p"), "p_") }
	remove := func(id string) {
		cctx, cancel := d.cleanupCtx(ctx)
		defer cancel()
		if err := d.Remove(cctx, id); err != nil {
			d.log.ErrorContext(ctx, "probe: remove smoke container", "container", id, "err", err)
		}
	}
	spec.Name = name()
	src, err := d.Create(ctx, spec)
	if err != nil {
		return fail("create", err)
	}
	defer remove(src)
	if err := d.Start(ctx, src); err != nil {
		return fail("start", err)
	}
	image, err := os.MkdirTemp("", "genesis-probe-ckpt-")
	if err != nil {
		return fail("image dir", err)
	}
	defer os.RemoveAll(image)
	// The agent needs a moment to listen; a save before that is a save too.
	if err := d.Checkpoint(ctx, src, driver.CheckpointOptions{ImagePath: image}); err != nil {
		return fail("save", err)
	}
	spec.Name, spec.Restore = name(), &driver.RestoreOrder{ImagePath: image}
	dst, err := d.Create(ctx, spec)
	if err != nil {
		return fail("create the restored container", err)
	}
	defer remove(dst)
	begin := time.Now()
	if err := d.Start(ctx, dst); err != nil {
		return fail("restore", err)
	}
	st, err := d.Inspect(ctx, dst)
	if err != nil {
		return fail("inspect the restored container", err)
	}
	if !st.Running {
		return fail("restore", fmt.Errorf("the restored container is %s (exit %d)", st.State, st.ExitCode))
	}
	return driver.Feature{Supported: true, Method: fmt.Sprintf("runsc checkpoint / restore through %s (smoke restore %d ms)", driver.RestoreRuntime, time.Since(begin).Milliseconds())}
}
