package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

func badMount(format string, args ...any) error {
	return errdefs.WithCode(CodeInvalidMount, fmt.Errorf(format+": %w", append(args, errdefs.ErrInvalidArgument)...))
}

// ValidateMounts checks a request's mounts without looking anything up:
// names, paths strictly below one of the manager's roots and, when roots
// is not nil (a profile's volume_roots), below one of those too, no path
// twice, no volume twice, at most MaxMountsPerSandbox.
func (m *Manager) ValidateMounts(reqs []sandbox.VolumeRequest, roots []string) error {
	if len(reqs) > MaxMountsPerSandbox {
		return badMount("%d volumes: at most %d per sandbox", len(reqs), MaxMountsPerSandbox)
	}
	var names, paths []string
	for _, r := range reqs {
		if err := ValidName(r.Volume); err != nil {
			return err
		}
		p := r.Path
		switch {
		case p == "" || len(p) > maxMountPath || !filepath.IsAbs(p) || filepath.Clean(p) != p:
			return badMount("mount path %.70q of volume %s: a clean absolute path of at most %d bytes", p, r.Volume, maxMountPath)
		case strings.ContainsAny(p, ":,\n\x00"):
			return badMount("mount path %.70q of volume %s may not hold ':', ',' or control characters", p, r.Volume)
		case !below(p, m.cfg.Roots):
			return badMount("mount path %q of volume %s is not below an allowed root (%s)", p, r.Volume, strings.Join(m.cfg.Roots, ", "))
		case roots != nil && !below(p, roots):
			return badMount("mount path %q of volume %s is not below a root its profile allows (%s)", p, r.Volume, strings.Join(roots, ", "))
		case slices.Contains(names, r.Volume):
			return badMount("volume %s is mounted twice", r.Volume)
		}
		for _, q := range paths {
			if q == p || hasPrefixDir(p, q) || hasPrefixDir(q, p) {
				return badMount("mount paths %s and %s overlap", q, p)
			}
		}
		names, paths = append(names, r.Volume), append(paths, p)
	}
	return nil
}

// Acquire takes tenant's volumes for sandbox id as reqs ask, each by one
// store update under its row lock: a writable mount needs the volume
// unheld by any other sandbox, a read-only one needs no other writer; the
// rest is 409 volume_busy. It gives each volume's root to uid:gid and
// returns the bind mounts; a failure releases what it took. Taking again
// what id holds already (a retry) succeeds.
func (m *Manager) Acquire(ctx context.Context, tenant, id string, reqs []sandbox.VolumeRequest, roots []string, uid, gid int) (_ []driver.Mount, err error) {
	if err := m.ValidateMounts(reqs, roots); err != nil {
		return nil, err
	}
	var taken []string
	defer func() {
		if err != nil {
			for _, vid := range taken {
				if rerr := m.drop(context.WithoutCancel(ctx), vid, id); rerr != nil {
					m.log.Warn("volumes: releasing after a failed acquire", "volume", vid, "sandbox", id, "err", rerr)
				}
			}
		}
	}()
	out := make([]driver.Mount, 0, len(reqs))
	for _, r := range reqs {
		v, err := m.Get(ctx, tenant, r.Volume)
		if err != nil {
			return nil, err
		}
		v, err = m.cfg.Store.UpdateVolume(ctx, v.ID, m.cfg.Now(), func(x *sandbox.Volume) error {
			if x.State != sandbox.VolumeReady {
				return errdefs.WithCode(CodeVolumeNotReady, fmt.Errorf("volume %q is %s: %w", x.Name, x.State, errdefs.ErrConflict))
			}
			if mt, ok := x.MountOf(id); ok {
				if mt.Path != r.Path || mt.ReadOnly != r.ReadOnly {
					return badMount("sandbox %s holds volume %s at %s already", id, x.Name, mt.Path)
				}
				return nil
			}
			for _, mt := range x.Mounts {
				if !r.ReadOnly || !mt.ReadOnly {
					how := "read-only"
					if !mt.ReadOnly {
						how = "writable"
					}
					return errdefs.WithCode(CodeBusy, fmt.Errorf(
						"volume %q is mounted %s by sandbox %s: one writer or any number of readers: %w", x.Name, how, mt.SandboxID, errdefs.ErrConflict))
				}
			}
			x.Mounts = append(x.Mounts, sandbox.VolumeMount{SandboxID: id, Path: r.Path, ReadOnly: r.ReadOnly})
			return nil
		})
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil, notFound(r.Volume, err)
		}
		if err != nil {
			return nil, err
		}
		taken = append(taken, v.ID)
		if m.cfg.Provisioner != nil {
			out = append(out, driver.Mount{Volume: v.ID, Target: r.Path, ReadOnly: r.ReadOnly})
			continue
		}
		if err := m.ensureMounted(v); err != nil {
			return nil, err
		}
		dir := m.HostDir(v)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, fmt.Errorf("volume %q: giving its root to the sandbox user: %w", v.Name, err)
		}
		out = append(out, driver.Mount{Source: dir, Target: r.Path, ReadOnly: r.ReadOnly})
	}
	return out, nil
}

// Release drops every hold of sandbox id (of any tenant): call it once its
// container is gone. Releasing what holds nothing succeeds.
func (m *Manager) Release(ctx context.Context, id string) error {
	list, err := m.cfg.Store.ListVolumes(ctx, store.VolumeFilter{Mounted: true})
	if err != nil {
		return err
	}
	var errs []error
	for _, v := range list {
		if _, ok := v.MountOf(id); ok {
			errs = append(errs, m.drop(ctx, v.ID, id))
		}
	}
	return errors.Join(errs...)
}

// Check refuses, before anything is made, mounts that are malformed, of
// volumes tenant does not have or that are not ready, or that the volumes'
// holders now make busy. Acquire decides under the row lock; Check only
// spares a doomed create its record.
func (m *Manager) Check(ctx context.Context, tenant string, reqs []sandbox.VolumeRequest, roots []string) error {
	if err := m.ValidateMounts(reqs, roots); err != nil {
		return err
	}
	if ok, why := m.available(ctx); !ok {
		return m.unavailable(why)
	}
	for _, r := range reqs {
		v, err := m.Get(ctx, tenant, r.Volume)
		if err != nil {
			return err
		}
		if v.State != sandbox.VolumeReady {
			return errdefs.WithCode(CodeVolumeNotReady, fmt.Errorf("volume %q is %s: %w", v.Name, v.State, errdefs.ErrConflict))
		}
		for _, mt := range v.Mounts {
			if !r.ReadOnly || !mt.ReadOnly {
				return errdefs.WithCode(CodeBusy, fmt.Errorf(
					"volume %q is mounted by sandbox %s: one writer or any number of readers: %w", v.Name, mt.SandboxID, errdefs.ErrConflict))
			}
		}
	}
	return nil
}

// Holds reports whether sandbox id of tenant holds any volume.
func (m *Manager) Holds(ctx context.Context, tenant, id string) (bool, error) {
	list, err := m.Mounted(ctx, tenant, id)
	return len(list) > 0, err
}

// below reports whether p lies strictly below one of roots.
func below(p string, roots []string) bool {
	return slices.ContainsFunc(roots, func(root string) bool { return hasPrefixDir(p, root) })
}
