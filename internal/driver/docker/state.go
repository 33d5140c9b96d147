package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// Keeping a container's state (docs/design/snapshots.md): pause through
// the daemon (cgroup freezer under runc, runsc pause under runsc); saves,
// restores and root filesystem tars of runsc containers through runsc
// itself, on the state the daemon's runc shim keeps in RuntimeRoot; runc
// root filesystems through the daemon's commit.

var (
	_ driver.Pauser       = (*Driver)(nil)
	_ driver.Checkpointer = (*Driver)(nil)
	_ driver.RootfsSaver  = (*Driver)(nil)
)

// DefaultRuntimeRoot is where Docker's runc shim keeps the state of its
// runtimes' containers (runsc --root).
const DefaultRuntimeRoot = "/run/docker/runtime-runc/moby"

// Pause freezes a container's processes.
func (d *Driver) Pause(ctx context.Context, id string) error {
	return d.pauseCall(ctx, id, "pause")
}

// Unpause thaws a paused container.
func (d *Driver) Unpause(ctx context.Context, id string) error {
	return d.pauseCall(ctx, id, "unpause")
}

func (d *Driver) pauseCall(ctx context.Context, id, op string) error {
	if err := validID(id); err != nil {
		return err
	}
	ctx, cancel := d.callCtx(ctx, 0)
	defer cancel()
	err := d.api.call(ctx, request{op: op + " container " + id, method: http.MethodPost, path: "/containers/" + id + "/" + op}, nil)
	if statusOf(err) == http.StatusConflict {
		// Already in that state (or not running): say which.
		raw, ierr := d.inspectRaw(ctx, id)
		if ierr == nil && raw.State.Paused == (op == "pause") {
			return nil
		}
		return fmt.Errorf("docker: %s container %s: %v: %w", op, id, err, errdefs.ErrFailedPrecondition)
	}
	return err
}

// runscOf returns the runsc binary a container runs under, or an error of
// class ErrNotImplemented when it does not run under runsc.
func (d *Driver) runscOf(ctx context.Context, id string) (string, error) {
	raw, err := d.inspectRaw(ctx, id)
	if err != nil {
		return "", err
	}
	rt := raw.HostConfig.Runtime
	if rt != string(sandbox.RuntimeRunsc) && rt != driver.RestoreRuntime {
		return "", errdefs.WithCode("memory_checkpoint_unsupported", fmt.Errorf(
			"container %s runs under %q: only runsc (gVisor) saves processes and memory: %w", id, rt, errdefs.ErrNotImplemented))
	}
	rts, err := d.RegisteredRuntimes(ctx)
	if err != nil {
		return "", err
	}
	p := rts[string(sandbox.RuntimeRunsc)]
	if p == "" {
		return "", fmt.Errorf("docker: the runsc runtime is not registered: %w", errdefs.ErrUnavailable)
	}
	return p, nil
}

// runsc runs the runsc binary on the daemon's runtime state, bounded by
// the call timeout plus extra.
func (d *Driver) runsc(ctx context.Context, bin string, extra time.Duration, args ...string) error {
	ctx, cancel := d.callCtx(ctx, extra)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--root", d.runtimeRoot()}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.Index(msg, "\ngoroutine "); i > 0 {
			msg = msg[:i] // a panic's stack says nothing to a caller
		}
		if len(msg) > 600 {
			msg = msg[:600] + "…"
		}
		if ctx.Err() != nil {
			return fmt.Errorf("docker: runsc %s: %v: %s: %w", args[0], ctx.Err(), msg, errdefs.ErrUnavailable)
		}
		return fmt.Errorf("docker: runsc %s: %v: %s: %w", args[0], err, msg, errdefs.ErrInternal)
	}
	return nil
}

func (d *Driver) runtimeRoot() string {
	if d.cfg.RuntimeRoot != "" {
		return d.cfg.RuntimeRoot
	}
	return DefaultRuntimeRoot
}

func (d *Driver) restoreDir() string {
	if d.cfg.RestoreOrderDir != "" {
		return d.cfg.RestoreOrderDir
	}
	return driver.RestoreOrderDir
}

// Checkpoint saves a runsc container's whole state to o.ImagePath
// (uncompressed, so a restore can read it in the background).
func (d *Driver) Checkpoint(ctx context.Context, id string, o driver.CheckpointOptions) error {
	if err := validID(id); err != nil {
		return err
	}
	if o.ImagePath == "" || !filepath.IsAbs(o.ImagePath) {
		return errdefs.Invalid("docker: checkpoint image path %q must be absolute", o.ImagePath)
	}
	bin, err := d.runscOf(ctx, id)
	if err != nil {
		return err
	}
	args := []string{"checkpoint", "--image-path", o.ImagePath, "--compression=none"}
	if o.LeaveRunning {
		args = append(args, "--leave-running")
	}
	return d.runsc(ctx, bin, time.Minute, append(args, id)...)
}

// SaveRootfsUpper writes a tar of a runsc container's root filesystem
// changes to path.
func (d *Driver) SaveRootfsUpper(ctx context.Context, id, path string) error {
	if err := validID(id); err != nil {
		return err
	}
	bin, err := d.runscOf(ctx, id)
	if err != nil {
		return err
	}
	return d.runsc(ctx, bin, time.Minute, "tar", "rootfs-upper", "--file", path, id)
}

// CommitRootfs makes image ref from a container's files (the daemon pauses
// it for the copy) and returns the size of the layer the commit added:
// the image's newest layer, by its history.
func (d *Driver) CommitRootfs(ctx context.Context, id, ref string, labels map[string]string) (int64, error) {
	if err := validID(id); err != nil {
		return 0, err
	}
	repo, tag, ok := strings.Cut(ref, ":")
	if !ok || repo == "" || tag == "" {
		return 0, errdefs.Invalid("docker: commit ref %q: want repo:tag", ref)
	}
	ctx, cancel := d.callCtx(ctx, 5*time.Minute)
	defer cancel()
	q := url.Values{"container": {id}, "repo": {repo}, "tag": {tag}, "pause": {"1"}}
	body := map[string]any{"Labels": labels}
	if err := d.api.call(ctx, request{op: "commit container " + id, method: http.MethodPost, path: "/commit", query: q, body: body}, nil); err != nil {
		return 0, err
	}
	var history []struct {
		Size int64 `json:"Size"`
	}
	if err := d.api.call(ctx, request{op: "history of image " + ref, method: http.MethodGet, path: "/images/" + ref + "/history"}, &history); err != nil {
		return 0, err
	}
	if len(history) == 0 {
		return 0, fmt.Errorf("docker: image %s has no history: %w", ref, errdefs.ErrUnavailable)
	}
	return history[0].Size, nil
}

// RemoveImage removes an image the service made (a committed root
// filesystem). A missing image is not an error.
func (d *Driver) RemoveImage(ctx context.Context, ref string) error {
	ctx, cancel := d.callCtx(ctx, 0)
	defer cancel()
	// Never forced: a forced removal untags an image a container still
	// runs from, and the image then outlives it with no name at all.
	err := d.api.call(ctx, request{op: "remove image " + ref, method: http.MethodDelete, path: "/images/" + ref}, nil)
	switch statusOf(err) {
	case http.StatusNotFound:
		return nil
	case http.StatusConflict:
		return fmt.Errorf("docker: image %s: a container was made from it: %w", ref, errdefs.ErrConflict)
	}
	return err
}

// SavedImages lists the images with every label of labels, dangling ones
// included.
func (d *Driver) SavedImages(ctx context.Context, labels ...string) ([]driver.SavedImage, error) {
	ctx, cancel := d.callCtx(ctx, 0)
	defer cancel()
	f, _ := json.Marshal(map[string][]string{"label": labels})
	var list []struct {
		ID       string            `json:"Id"`
		RepoTags []string          `json:"RepoTags"`
		Labels   map[string]string `json:"Labels"`
	}
	if err := d.api.call(ctx, request{op: "list images", method: http.MethodGet, path: "/images/json", query: url.Values{"filters": {string(f)}}}, &list); err != nil {
		return nil, err
	}
	out := make([]driver.SavedImage, 0, len(list))
	for _, im := range list {
		refs := []string{}
		for _, t := range im.RepoTags {
			if t != "<none>:<none>" {
				refs = append(refs, t)
			}
		}
		out = append(out, driver.SavedImage{ID: im.ID, Refs: refs, Labels: im.Labels})
	}
	return out, nil
}

// writeRestoreOrder leaves the restore order of container id for the
// runsc-restore runtime.
func (d *Driver) writeRestoreOrder(id string, o *driver.RestoreOrder) error {
	dir := d.restoreDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("docker: restore order dir: %v: %w", err, errdefs.ErrUnavailable)
	}
	b, _ := json.Marshal(o)
	tmp := filepath.Join(dir, "."+id+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("docker: write restore order: %v: %w", err, errdefs.ErrUnavailable)
	}
	if err := os.Rename(tmp, filepath.Join(dir, id+".json")); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("docker: write restore order: %v: %w", err, errdefs.ErrUnavailable)
	}
	return nil
}

// dropRestoreOrder removes the restore order of container id, if any.
func (d *Driver) dropRestoreOrder(id string) {
	err := os.Remove(filepath.Join(d.restoreDir(), id+".json"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.log.Warn("remove restore order", "container", id, "err", err)
	}
}
