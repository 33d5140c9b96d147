package docker

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// ProbeImage is the tiny image smoke containers run from: a few empty
// directories; the agent binary is bind-mounted in.
const ProbeImage = "genesis/probe:1"

// agentVersion is the JSON line "genesis-agent version" prints.
type agentVersion struct {
	Agent  string `json:"agent"`
	Kernel string `json:"kernel"`
	UID    *int   `json:"uid"`
}

// probedRuntime reports whether a runtime registered in Docker is one the
// probe smoke-tests.
func probedRuntime(name string) bool {
	return name == string(sandbox.RuntimeRunc) || name == string(sandbox.RuntimeRunsc) || strings.HasPrefix(name, "kata")
}

// Probe asks the daemon what it offers and smoke-runs the agent under each
// runc, runsc and kata* runtime, in parallel. A daemon that does not answer
// yields a result with Healthy false and Error set, and a nil error.
func (d *Driver) Probe(ctx context.Context) (driver.ProbeResult, error) {
	res := driver.ProbeResult{Driver: d.Name(), Runtimes: []driver.RuntimeInfo{}, CheckedAt: time.Now().UTC()}
	info, ver, err := d.daemonFacts(ctx)
	if err != nil {
		res.Error = err.Error()
		res.Checkpoint = driver.Feature{Reason: "docker daemon not reachable"}
		res.DiskQuota = diskQuotaFeature()
		d.log.WarnContext(ctx, "probe: daemon not reachable", "err", err)
		return res, nil
	}
	res.DaemonVersion = info.ServerVersion
	res.APIVersion = ver.APIVersion
	res.KernelVersion = info.KernelVersion
	res.CgroupVersion = info.CgroupVersion
	res.DiskQuota = diskQuotaFeature()

	names := slices.Sorted(maps.Keys(info.Runtimes))
	names = slices.DeleteFunc(names, func(n string) bool { return !probedRuntime(n) })
	res.Runtimes = make([]driver.RuntimeInfo, len(names))
	imageErr := d.ensureProbeImage(ctx)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			ri := driver.RuntimeInfo{Name: name, Path: info.Runtimes[name].Path}
			if imageErr != nil {
				ri.Error = "probe image: " + imageErr.Error()
			} else {
				d.smoke(ctx, &ri)
			}
			ri.Features = d.stateFeatures(ctx, &ri, info)
			ri.CheckedAt = time.Now().UTC()
			res.Runtimes[i] = ri
		})
	}
	wg.Wait()
	res.Checkpoint = driver.Feature{Reason: "no runtime saves processes and memory"}
	for _, r := range res.Runtimes {
		if r.Features.MemoryCheckpoint.Supported {
			res.Checkpoint = r.Features.MemoryCheckpoint
		}
	}
	for _, r := range res.Runtimes {
		if r.Healthy {
			res.Healthy = true
		}
		d.log.InfoContext(ctx, "probe: runtime", "runtime", r.Name, "healthy", r.Healthy, "version", r.Version, "smoke_ms", r.SmokeMS, "error", r.Error)
	}
	if !res.Healthy {
		res.Error = "no runtime passed its smoke run"
	}
	return res, nil
}

// daemonFacts reads GET /info and GET /version.
func (d *Driver) daemonFacts(ctx context.Context) (infoResponse, versionInfo, error) {
	ctx, cancel := d.callCtx(ctx, 0)
	defer cancel()
	info, err := d.info(ctx)
	if err != nil {
		return infoResponse{}, versionInfo{}, err
	}
	ver, err := d.api.serverVersion(ctx)
	return info, ver, err
}

func diskQuotaFeature() driver.Feature {
	f := driver.Feature{Method: "loop-ext4"}
	switch {
	case os.Geteuid() != 0:
		f.Reason = "not running as root (loop mounts need it)"
	case !exists("/dev/loop-control"):
		f.Reason = "/dev/loop-control is missing"
	default:
		if _, err := exec.LookPath("mkfs.ext4"); err != nil {
			f.Reason = "mkfs.ext4 is not on PATH"
		} else {
			f.Supported = true
		}
	}
	return f
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// ensureProbeImage imports ProbeImage once if it is missing.
func (d *Driver) ensureProbeImage(ctx context.Context) error {
	d.probeM.Lock()
	defer d.probeM.Unlock()
	ok, err := d.ImagePresent(ctx, ProbeImage)
	if err != nil || ok {
		return err
	}
	tarball, err := probeRootfs()
	if err != nil {
		return err
	}
	return d.ImportImage(ctx, ProbeImage, bytes.NewReader(tarball), map[string]string{
		driver.LabelManaged: "true",
		driver.LabelPurpose: "probe",
	}, nil)
}

// probeRootfs returns a tar holding only a few empty directories.
func probeRootfs() ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, dir := range []string{"dev", "etc", "proc", "run", "sys", "tmp"} {
		mode := int64(0o755)
		if dir == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: mode, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, fmt.Errorf("docker: probe image: %v: %w", err, errdefs.ErrInternal)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("docker: probe image: %v: %w", err, errdefs.ErrInternal)
	}
	return buf.Bytes(), nil
}

// smoke runs "genesis-agent version" under ri.Name and fills ri.
func (d *Driver) smoke(ctx context.Context, ri *driver.RuntimeInfo) {
	if d.cfg.AgentDir == "" {
		ri.Error = "no agent directory configured: cannot smoke-test"
		return
	}
	if !exists(filepath.Join(d.cfg.AgentDir, filepath.Base(driver.AgentBinary))) {
		ri.Error = fmt.Sprintf("agent binary not found in %s", d.cfg.AgentDir)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.ProbeTimeout)
	defer cancel()
	begin := time.Now()
	id, err := d.Create(ctx, driver.Spec{
		Name:      "genesis-probe-" + ri.Name + "-" + strings.TrimPrefix(sandbox.NewID("p"), "p_"),
		Image:     ProbeImage,
		Runtime:   sandbox.Runtime(ri.Name),
		Labels:    map[string]string{driver.LabelPurpose: "probe", driver.LabelRuntime: ri.Name},
		User:      "65534:65534",
		Cmd:       []string{driver.AgentBinary, "version"},
		Resources: sandbox.Resources{CPU: 1, MemoryMB: 128, Pids: 64},
		ReadOnly:  true,
		Mounts:    []driver.Mount{{Source: d.cfg.AgentDir, Target: driver.AgentMountDir, ReadOnly: true}},
	})
	if err != nil {
		ri.Error = err.Error()
		ri.TimedOut = ctx.Err() != nil
		return
	}
	defer func() {
		cctx, cancel := d.cleanupCtx(ctx)
		defer cancel()
		if err := d.Remove(cctx, id); err != nil {
			d.log.ErrorContext(ctx, "probe: remove smoke container", "container", id, "err", err)
		}
	}()
	if err := d.Start(ctx, id); err != nil {
		ri.Error = err.Error()
		ri.TimedOut = ctx.Err() != nil
		return
	}
	code, err := d.Wait(ctx, id)
	if err != nil {
		ri.Error = err.Error()
		ri.TimedOut = ctx.Err() != nil
		return
	}
	stdout, stderr, err := d.Logs(ctx, id)
	ri.SmokeMS = time.Since(begin).Milliseconds()
	if err != nil {
		ri.Error = err.Error()
		return
	}
	v, perr := parseAgentVersion(stdout)
	switch {
	case code != 0:
		ri.Error = fmt.Sprintf("smoke container exited %d: %s", code, tail(stderr, stdout))
	case perr != nil:
		ri.Error = perr.Error()
	default:
		ri.Healthy = true
		ri.Version = v.Kernel
	}
}

// parseAgentVersion finds the agent's JSON line in out.
func parseAgentVersion(out []byte) (agentVersion, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var v agentVersion
		if err := json.Unmarshal(line, &v); err == nil && v.Agent != "" && v.Kernel != "" && v.UID != nil {
			return v, nil
		}
	}
	return agentVersion{}, errors.New("agent printed no version line: " + tail(out))
}

// tail returns the last few hundred bytes of the first non-empty buffer.
func tail(bufs ...[]byte) string {
	for _, b := range bufs {
		b = bytes.TrimSpace(b)
		if len(b) > 0 {
			return string(b[max(0, len(b)-300):])
		}
	}
	return "(no output)"
}
