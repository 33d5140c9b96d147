package diskquota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/mountinfo"
)

// Method names how quotas are enforced, as capabilities report it.
const Method = "loop-ext4"

// Config configures a Manager.
type Config struct {
	// Root is the directory below which every image and mount point of
	// this service instance lives. Mounts below it are this instance's.
	Root string
	// Mkfs is the mkfs.ext4 binary; empty looks it up on PATH.
	Mkfs   string
	Logger *slog.Logger
}

// Manager creates, removes and recovers workspace filesystems below Root.
type Manager struct {
	root string
	mkfs string
	log  *slog.Logger

	once   sync.Once
	reason string // why quotas are unavailable; "" when available
}

// New validates cfg. It has no side effects.
func New(cfg Config) (*Manager, error) {
	if cfg.Root == "" || !filepath.IsAbs(cfg.Root) {
		return nil, errdefs.Invalid("diskquota: root %q must be an absolute path", cfg.Root)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{root: filepath.Clean(cfg.Root), mkfs: cfg.Mkfs, log: cfg.Logger}, nil
}

// Spec describes one workspace.
type Spec struct {
	// Image is the image file to create; Dir the existing, empty directory
	// to mount it on. Both must lie below the manager's root.
	Image, Dir string
	// SizeMB is the filesystem's size in MiB.
	SizeMB int64
	// UID and GID own the filesystem's root directory.
	UID, GID int
}

// Available reports whether this host can enforce quotas and, if not, why.
func (m *Manager) Available() (bool, string) {
	m.once.Do(func() { m.reason = m.check() })
	return m.reason == "", m.reason
}

// ErrUnavailable is wrapped by Create when this host cannot enforce quotas.
var ErrUnavailable = errors.New("disk quotas are unavailable on this host")

// within reports whether p lies strictly below the manager's root.
func (m *Manager) within(p string) bool {
	rel, err := filepath.Rel(m.root, filepath.Clean(p))
	return err == nil && rel != "." && filepath.IsLocal(rel)
}

// Create makes the image file, formats it and mounts it on spec.Dir. A
// failure removes whatever it made.
func (m *Manager) Create(ctx context.Context, spec Spec) (err error) {
	if ok, why := m.Available(); !ok {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, why, errdefs.ErrFailedPrecondition)
	}
	switch {
	case !m.within(spec.Image) || !m.within(spec.Dir):
		return errdefs.Invalid("diskquota: %s and %s must lie below %s", spec.Image, spec.Dir, m.root)
	case spec.SizeMB <= 0:
		return fmt.Errorf("diskquota: size %d MiB: %w", spec.SizeMB, errdefs.ErrInvalidArgument)
	}
	f, err := os.OpenFile(spec.Image, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("diskquota: image: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(spec.Image)
		}
	}()
	err = f.Truncate(spec.SizeMB << 20)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("diskquota: sizing image: %w", err)
	}
	if err := m.format(ctx, spec); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("diskquota: %w", err)
	}
	if err := mountImage(spec.Image, spec.Dir); err != nil {
		return fmt.Errorf("diskquota: mounting %s: %w", spec.Image, err)
	}
	// mkfs leaves lost+found; the workspace starts empty (fsck would make
	// it again if ever needed).
	_ = os.Remove(filepath.Join(spec.Dir, "lost+found"))
	return nil
}

// Remove unmounts dir (lazily if it is still busy; the loop device is
// detached when the last user lets go) and deletes image. It is idempotent:
// a directory not mounted and an image already gone are not errors.
func (m *Manager) Remove(image, dir string) error {
	if !m.within(image) || !m.within(dir) {
		return errdefs.Invalid("diskquota: %s and %s must lie below %s", image, dir, m.root)
	}
	if err := unmount(dir); err != nil {
		return fmt.Errorf("diskquota: unmounting %s: %w", dir, err)
	}
	if err := os.Remove(image); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("diskquota: removing image: %w", err)
	}
	return nil
}

// Mounts lists the mount points below the root.
func (m *Manager) Mounts() ([]string, error) {
	mps, err := mountinfo.Read()
	if err != nil {
		return nil, fmt.Errorf("diskquota: %w", err)
	}
	return m.below(mps), nil
}

// below keeps the mount points strictly below the root (the root also
// taken through symlinks, as the kernel reports real paths).
func (m *Manager) below(mps []string) []string {
	var out []string
	for _, mp := range mps {
		if m.within(mp) || m.withinReal(mp) {
			out = append(out, mp)
		}
	}
	return out
}

// Recover removes the workspaces below the root that keep does not claim:
// it is given each mount point and answers whether it belongs to a live
// sandbox. (Loop devices need no recovery: they are attached with
// auto-clear, so one whose attacher died before mounting, or whose
// filesystem is unmounted, detaches itself.) It returns how many mounts it
// removed.
func (m *Manager) Recover(keep func(dir string) bool) (int, error) {
	mounts, err := m.Mounts()
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, dir := range mounts {
		if keep(dir) {
			continue
		}
		if err := unmount(dir); err != nil {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", dir, err))
			continue
		}
		m.log.Info("unmounted stale workspace", "dir", dir)
		n++
	}
	return n, errors.Join(errs...)
}

// LoopDevices lists the loop devices whose backing file lies below the root.
func (m *Manager) LoopDevices() ([]string, error) {
	devs, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range devs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // detached meanwhile
		}
		backing := strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)")
		if m.within(backing) || m.withinReal(backing) {
			out = append(out, "/dev/"+filepath.Base(filepath.Dir(filepath.Dir(p))))
		}
	}
	return out, nil
}

func (m *Manager) withinReal(p string) bool {
	real, err := filepath.EvalSymlinks(m.root)
	if err != nil || real == m.root {
		return false
	}
	rel, err := filepath.Rel(real, p)
	return err == nil && rel != "." && filepath.IsLocal(rel)
}

// Mount mounts the existing image (one Create made) on dir again unless
// dir is a mount point already: a filesystem that outlives the process
// that made it (a named volume) is mounted on first use after a restart
// of the host. It is idempotent.
func (m *Manager) Mount(image, dir string) error {
	if !m.within(image) || !m.within(dir) {
		return errdefs.Invalid("diskquota: %s and %s must lie below %s", image, dir, m.root)
	}
	mounted, err := m.Mounted(dir)
	if err != nil || mounted {
		return err
	}
	if ok, why := m.Available(); !ok {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, why, errdefs.ErrFailedPrecondition)
	}
	if err := mountImage(image, dir); err != nil {
		return fmt.Errorf("diskquota: mounting %s: %w", image, err)
	}
	return nil
}

// Mounted reports whether dir is a mount point.
func (m *Manager) Mounted(dir string) (bool, error) {
	mps, err := mountinfo.Read()
	if err != nil {
		return false, fmt.Errorf("diskquota: %w", err)
	}
	clean := filepath.Clean(dir)
	real, rerr := filepath.EvalSymlinks(clean)
	for _, mp := range mps {
		if mp == clean || (rerr == nil && mp == real) {
			return true, nil
		}
	}
	return false, nil
}
