package volumes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/diskquota"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/tenant"
)

// Stable problem codes.
const (
	CodeInvalidName    = "invalid_volume_name"
	CodeInvalidSize    = "invalid_volume_size"
	CodeNotFound       = "volume_not_found"
	CodeExists         = "volume_exists"
	CodeInUse          = "volume_in_use"
	CodeBusy           = "volume_busy"
	CodeInvalidMount   = "invalid_volume_mount"
	CodeQuotaExceeded  = "quota_exceeded"
	CodeFull           = "volume_full"
	CodeUnavailable    = "volumes_unavailable"
	CodeInvalidPath    = "invalid_path"
	CodeFileNotFound   = "file_not_found"
	CodeFileExists     = "file_exists"
	CodeNotADirectory  = "not_a_directory"
	CodeIsADirectory   = "is_a_directory"
	CodeVolumeNotReady = "volume_not_ready"
	// CodeFilesUnsupported answers the files API of volumes a sandboxer
	// keeps (Config.Provisioner): no host directory holds them.
	CodeFilesUnsupported = "volume_files_unsupported"
)

// DefaultRoots are where a sandbox may mount a volume when the
// configuration names none: strictly below each of them.
var DefaultRoots = []string{"/workspace", "/mnt"}

// Limits of a request.
const (
	// MaxMountsPerSandbox bounds the volumes one sandbox mounts.
	MaxMountsPerSandbox = 8
	maxMountPath        = 256
)

// records is what the manager needs of the store.
type records interface {
	store.Volumes
	// GetTenant reads a tenant's volume quotas.
	GetTenant(ctx context.Context, name string) (*tenant.Tenant, error)
	GetSandbox(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error)
}

// Config configures a Manager.
type Config struct {
	Store records
	// Dir holds the volumes: <Dir>/<id>/volume.img and its mount point
	// <Dir>/<id>/data. It must be absolute.
	Dir string
	// MaxSizeMB bounds one volume; MaxMBPerTenant the summed size of a
	// tenant's volumes; MaxPerTenant their number (0: no bound). A
	// tenant's own quotas (max_volume_mb, max_volumes) narrow the last two.
	MaxSizeMB      int64
	MaxMBPerTenant int64
	MaxPerTenant   int
	// LockTenant takes the tenant's quota lock, which every sandbox create
	// and a tenant's delete take too (control.Service.LockTenant, shared
	// by the instances sharing the store): a create checks the tenant's
	// limits and stores its record under it. nil: a lock of this manager's.
	LockTenant func(ctx context.Context, tenant string) (unlock func(), err error)
	// Roots are the container paths strictly below which a volume may be
	// mounted; nil takes DefaultRoots.
	Roots []string
	// UID and GID own a new volume's root directory (the built-in images'
	// sandbox user); a mount gives it to the mounting sandbox's user.
	UID, GID int
	// Provisioner, when set, keeps the volumes' data (driver/kube: a
	// PersistentVolumeClaim each) instead of loop-mounted images below
	// Dir; a mount is then the provisioner's (driver.Mount.Volume). The
	// files API goes through the provisioner's helpers when it implements
	// driver.VolumeFiles (remotefiles.go), else answers 501
	// volume_files_unsupported.
	Provisioner driver.VolumeProvisioner
	Now         func() time.Time
	Logger      *slog.Logger
}

// Manager makes, mounts and removes volumes. Safe for concurrent use.
type Manager struct {
	cfg   Config
	quota *diskquota.Manager
	log   *slog.Logger

	mu    sync.Mutex
	locks map[string]*sync.Mutex // volume id → serializes its host mount
}

// New validates cfg. It has no side effects.
func New(cfg Config) (*Manager, error) {
	if cfg.Store == nil || !filepath.IsAbs(cfg.Dir) {
		return nil, errdefs.Invalid("volumes: a store and an absolute dir are required")
	}
	if cfg.MaxSizeMB <= 0 {
		cfg.MaxSizeMB = 100 << 10
	}
	if cfg.Roots == nil {
		cfg.Roots = DefaultRoots
	}
	for _, r := range cfg.Roots {
		if !filepath.IsAbs(r) || filepath.Clean(r) != r || r == "/" {
			return nil, errdefs.Invalid("volumes: mount root %q must be a clean absolute path other than /", r)
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	q, err := diskquota.New(diskquota.Config{Root: cfg.Dir, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	return &Manager{cfg: cfg, quota: q, log: cfg.Logger, locks: map[string]*sync.Mutex{}}, nil
}

// Name names the manager's control hook.
func (m *Manager) Name() string { return "volumes" }

// Roots are the container paths below which volumes may be mounted.
func (m *Manager) Roots() []string { return slices.Clone(m.cfg.Roots) }

// Available says whether volumes can be made here, and why not.
func (m *Manager) Available() (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), availableWait)
	defer cancel()
	return m.available(ctx)
}

// availableWait bounds a provisioner's answer to Available.
const availableWait = 5 * time.Second

func (m *Manager) available(ctx context.Context) (bool, string) {
	if p := m.cfg.Provisioner; p != nil {
		return p.VolumesAvailable(ctx)
	}
	return m.quota.Available()
}

// unavailable is the 501 of a service that cannot make volumes now.
func (m *Manager) unavailable(why string) error {
	if m.cfg.Provisioner != nil {
		return errdefs.WithCode(CodeUnavailable, fmt.Errorf("volumes are unavailable: %s: %w", why, errdefs.ErrNotImplemented))
	}
	return errdefs.WithCode(CodeUnavailable, fmt.Errorf("volumes need loop-mounted filesystems, unavailable here: %s: %w", why, errdefs.ErrNotImplemented))
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// reservedNames may not name a volume: they read as something else in a
// path or a command line.
var reservedNames = []string{"default", "none", "all", "workspace", "tmp"}

// ValidName refuses a name that is not a volume's.
func ValidName(name string) error {
	if !nameRE.MatchString(name) {
		return errdefs.WithCode(CodeInvalidName, fmt.Errorf(
			"volume name %.70q: 1 to 63 lower-case letters, digits, '-' and '_', starting with a letter or digit: %w", name, errdefs.ErrInvalidArgument))
	}
	if slices.Contains(reservedNames, name) {
		return errdefs.WithCode(CodeInvalidName, errdefs.Invalid("volume name %q is reserved", name))
	}
	return nil
}

func (m *Manager) image(v *sandbox.Volume) string {
	return filepath.Join(m.cfg.Dir, v.ID, "volume.img")
}

// HostDir is the host directory the volume's filesystem is mounted on.
func (m *Manager) HostDir(v *sandbox.Volume) string { return filepath.Join(m.cfg.Dir, v.ID, "data") }

func notFound(name string, err error) error {
	if errors.Is(err, errdefs.ErrNotFound) {
		return errdefs.WithCode(CodeNotFound, fmt.Errorf("volume %q: %w", name, errdefs.ErrNotFound))
	}
	return err
}

// Create makes tenant's volume name of sizeMB MiB: its record first,
// within the tenant's limits and under its quota lock (reserve: a name
// taken is 409 volume_exists, a limit passed 429 quota_exceeded), then its
// filesystem. A failure removes what it made.
func (m *Manager) Create(ctx context.Context, tenant, name string, sizeMB int64) (_ *sandbox.Volume, err error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	if sizeMB < 1 || sizeMB > m.cfg.MaxSizeMB {
		return nil, errdefs.WithCode(CodeInvalidSize, errdefs.Invalid("size_mb must be between 1 and %d, got %d", m.cfg.MaxSizeMB, sizeMB))
	}
	if ok, why := m.available(ctx); !ok {
		return nil, m.unavailable(why)
	}
	now := m.cfg.Now()
	v := &sandbox.Volume{ID: sandbox.NewID("vol"), Tenant: tenant, Name: name, SizeMB: sizeMB, State: sandbox.VolumeCreating,
		CreatedAt: now, UpdatedAt: now}
	if err := m.reserve(ctx, v); err != nil {
		return nil, err
	}
	// From here on the work finishes or rolls back even if the caller
	// goes away.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	defer func() {
		if err != nil {
			if rerr := m.removeFiles(ctx, v); rerr != nil {
				m.log.Error("removing the files of a failed volume create", "volume", v.ID, "err", rerr)
				return // the record stays (creating): Sweep finishes it
			}
			if derr := m.cfg.Store.DeleteVolume(ctx, v.ID); derr != nil {
				m.log.Error("removing the record of a failed volume create", "volume", v.ID, "err", derr)
			}
		}
	}()
	if p := m.cfg.Provisioner; p != nil {
		if err := p.CreateVolume(ctx, driver.VolumeSpec{ID: v.ID, Tenant: tenant, Name: name, SizeMB: sizeMB}); err != nil {
			return nil, err
		}
		return m.cfg.Store.UpdateVolume(ctx, v.ID, m.cfg.Now(), func(x *sandbox.Volume) error {
			x.State = sandbox.VolumeReady
			return nil
		})
	}
	if err := os.MkdirAll(m.cfg.Dir, 0o711); err != nil {
		return nil, fmt.Errorf("volumes dir: %w", err)
	}
	if err := os.Mkdir(filepath.Join(m.cfg.Dir, v.ID), 0o700); err != nil {
		return nil, fmt.Errorf("volume dir: %w", err)
	}
	if err := os.Mkdir(m.HostDir(v), 0o755); err != nil {
		return nil, fmt.Errorf("volume dir: %w", err)
	}
	if err := m.quota.Create(ctx, diskquota.Spec{Image: m.image(v), Dir: m.HostDir(v), SizeMB: sizeMB, UID: m.cfg.UID, GID: m.cfg.GID}); err != nil {
		return nil, err
	}
	return m.cfg.Store.UpdateVolume(ctx, v.ID, m.cfg.Now(), func(x *sandbox.Volume) error {
		x.State = sandbox.VolumeReady
		return nil
	})
}

// reserve checks v against its tenant's volume limits and inserts its
// record, under the tenant's quota lock: a record counts from its insert,
// so concurrent creates (here, or in another instance sharing the store
// and the lock) cannot pass a limit together. A name taken is 409
// volume_exists; a limit passed is 429 quota_exceeded, and nothing is
// stored.
func (m *Manager) reserve(ctx context.Context, v *sandbox.Volume) error {
	unlock, err := m.lockTenant(ctx, v.Tenant)
	if err != nil {
		return err
	}
	defer unlock()
	exists := func() error {
		return errdefs.WithCode(CodeExists, fmt.Errorf("volume %q exists: %w", v.Name, errdefs.ErrAlreadyExists))
	}
	if _, err := m.cfg.Store.GetVolume(ctx, v.Tenant, v.Name); err == nil {
		return exists()
	} else if !errors.Is(err, errdefs.ErrNotFound) {
		return err
	}
	q, err := m.tenantQuotas(ctx, v.Tenant)
	if err != nil {
		return err
	}
	maxN, maxMB := q.VolumeLimits(m.cfg.MaxPerTenant, m.cfg.MaxMBPerTenant)
	n, total, err := m.cfg.Store.VolumeUsage(ctx, v.Tenant)
	if err != nil {
		return err
	}
	// which names the bound that holds: the tenant's own quota when it set
	// the tighter one, else the service's limit.
	which := func(own bool, quota, config string) string {
		if own {
			return "its quota " + quota
		}
		return "the service's limit " + config
	}
	switch {
	case maxN > 0 && n+1 > maxN:
		return errdefs.WithCode(CodeQuotaExceeded, fmt.Errorf("tenant %s has %d volumes, %s is %d: delete one first: %w",
			v.Tenant, n, which(q.MaxVolumes == maxN, "max_volumes", "volumes.max_per_tenant"), maxN, errdefs.ErrResourceExhausted))
	case maxMB > 0 && total+v.SizeMB > maxMB:
		return errdefs.WithCode(CodeQuotaExceeded, fmt.Errorf("tenant %s's volumes take %d MiB, %d MiB more would pass %s of %d MiB: %w",
			v.Tenant, total, v.SizeMB, which(q.MaxVolumeMB == maxMB, "max_volume_mb", "volumes.max_mb_per_tenant"), maxMB, errdefs.ErrResourceExhausted))
	}
	if err := m.cfg.Store.CreateVolume(ctx, v); err != nil {
		if errors.Is(err, errdefs.ErrAlreadyExists) {
			return exists()
		}
		return err
	}
	return nil
}

// lockTenant takes the tenant's quota lock (Config.LockTenant), or this
// manager's lock of the tenant when none is configured.
func (m *Manager) lockTenant(ctx context.Context, tenant string) (func(), error) {
	if m.cfg.LockTenant != nil {
		return m.cfg.LockTenant(ctx, tenant)
	}
	return m.lock("tenant:" + tenant), nil
}

// tenantQuotas returns the tenant's quotas (none for a tenant without a
// record).
func (m *Manager) tenantQuotas(ctx context.Context, name string) (tenant.Quotas, error) {
	t, err := m.cfg.Store.GetTenant(ctx, name)
	if errors.Is(err, errdefs.ErrNotFound) {
		return tenant.Quotas{}, nil
	}
	if err != nil {
		return tenant.Quotas{}, err
	}
	return t.Quotas, nil
}

// Get returns tenant's volume name (404 volume_not_found when it has none:
// another tenant's is not seen).
func (m *Manager) Get(ctx context.Context, tenant, name string) (*sandbox.Volume, error) {
	if err := ValidName(name); err != nil {
		return nil, errdefs.WithCode(CodeNotFound, fmt.Errorf("volume %.70q: %w", name, errdefs.ErrNotFound))
	}
	v, err := m.cfg.Store.GetVolume(ctx, tenant, name)
	if err != nil {
		return nil, notFound(name, err)
	}
	return v, nil
}

// List returns tenant's volumes by name.
func (m *Manager) List(ctx context.Context, tenant string) ([]*sandbox.Volume, error) {
	return m.cfg.Store.ListVolumes(ctx, store.VolumeFilter{Tenant: tenant})
}

// Delete removes tenant's volume name and its data. A volume some sandbox
// mounts is 409 volume_in_use; a missing one is not an error.
func (m *Manager) Delete(ctx context.Context, tenant, name string) error {
	v, err := m.Get(ctx, tenant, name)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	v, err = m.cfg.Store.UpdateVolume(ctx, v.ID, m.cfg.Now(), func(x *sandbox.Volume) error {
		if len(x.Mounts) > 0 {
			return errdefs.WithCode(CodeInUse, fmt.Errorf("volume %q is mounted by sandbox %s: delete the sandbox first: %w",
				name, x.Mounts[0].SandboxID, errdefs.ErrConflict))
		}
		x.State = sandbox.VolumeDeleting
		return nil
	})
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return m.finishDelete(context.WithoutCancel(ctx), v)
}

// finishDelete removes a deleting (or failed creating) volume's files and
// then its record.
func (m *Manager) finishDelete(ctx context.Context, v *sandbox.Volume) error {
	if err := m.removeFiles(ctx, v); err != nil {
		return err
	}
	return m.cfg.Store.DeleteVolume(ctx, v.ID)
}

// removeFiles unmounts the volume and deletes its image and directory
// (or has the provisioner remove its storage).
func (m *Manager) removeFiles(ctx context.Context, v *sandbox.Volume) error {
	unlock := m.lock(v.ID)
	defer unlock()
	if p := m.cfg.Provisioner; p != nil {
		return p.RemoveVolume(ctx, v.ID)
	}
	dir := filepath.Join(m.cfg.Dir, v.ID)
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := m.quota.Remove(m.image(v), m.HostDir(v)); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

func (m *Manager) lock(id string) func() {
	m.mu.Lock()
	l, ok := m.locks[id]
	if !ok {
		l = &sync.Mutex{}
		m.locks[id] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// ensureMounted mounts the volume's filesystem on its host directory if
// it is not (the first use after the host restarted).
func (m *Manager) ensureMounted(v *sandbox.Volume) error {
	unlock := m.lock(v.ID)
	defer unlock()
	if err := m.quota.Mount(m.image(v), m.HostDir(v)); err != nil {
		return errdefs.WithCode(CodeUnavailable, fmt.Errorf("volume %q: %w", v.Name, err))
	}
	return nil
}

// ready returns tenant's volume name, mounted on the host, when it is ready.
func (m *Manager) ready(ctx context.Context, tenant, name string) (*sandbox.Volume, error) {
	v, err := m.Get(ctx, tenant, name)
	if err != nil {
		return nil, err
	}
	if v.State != sandbox.VolumeReady {
		return nil, errdefs.WithCode(CodeVolumeNotReady, fmt.Errorf("volume %q is %s: %w", name, v.State, errdefs.ErrConflict))
	}
	if m.cfg.Provisioner != nil {
		if m.volumeFiles() == nil {
			return nil, filesUnsupported(name)
		}
		return v, nil
	}
	return v, m.ensureMounted(v)
}

// Sweep releases the holds of sandboxes that are gone (a destroy that did
// not get to it, a crash) and finishes deletes and failed creates a
// previous process left.
func (m *Manager) Sweep(ctx context.Context, now time.Time, startup bool) {
	m.sweepHelpers(ctx, now)
	list, err := m.cfg.Store.ListVolumes(ctx, store.VolumeFilter{})
	if err != nil {
		m.log.Warn("volumes: sweep", "err", err)
		return
	}
	for _, v := range list {
		switch {
		case v.State == sandbox.VolumeDeleting && len(v.Mounts) == 0,
			v.State == sandbox.VolumeCreating && now.Sub(v.CreatedAt) > 10*time.Minute:
			if err := m.finishDelete(ctx, v); err != nil {
				m.log.Warn("volumes: finishing a delete", "volume", v.ID, "err", err)
			}
			continue
		}
		var gone []string
		for _, mt := range v.Mounts {
			if isHelper(mt.SandboxID) {
				// A files helper's hold ends with its call; one older than
				// any call is a crash's leftover (sweepHelpers removes its Pod).
				if helperStale(mt.SandboxID, now) {
					gone = append(gone, mt.SandboxID)
				}
				continue
			}
			sb, err := m.cfg.Store.GetSandbox(ctx, "", mt.SandboxID)
			if errors.Is(err, errdefs.ErrNotFound) || (err == nil && (sb.State.Final() || sb.State == sandbox.StateFailed)) {
				gone = append(gone, mt.SandboxID)
			}
		}
		if len(gone) > 0 {
			if err := m.drop(ctx, v.ID, gone...); err != nil {
				m.log.Warn("volumes: releasing the holds of ended sandboxes", "volume", v.ID, "err", err)
			}
		}
	}
}

// drop removes the holds of sandboxes ids from volume id.
func (m *Manager) drop(ctx context.Context, id string, ids ...string) error {
	_, err := m.cfg.Store.UpdateVolume(ctx, id, m.cfg.Now(), func(x *sandbox.Volume) error {
		x.Mounts = slices.DeleteFunc(x.Mounts, func(mt sandbox.VolumeMount) bool { return slices.Contains(ids, mt.SandboxID) })
		return nil
	})
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil
	}
	return err
}

// Mounted lists the volumes sandbox id holds.
func (m *Manager) Mounted(ctx context.Context, tenant, id string) ([]*sandbox.Volume, error) {
	list, err := m.cfg.Store.ListVolumes(ctx, store.VolumeFilter{Tenant: tenant, Mounted: true})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list, func(v *sandbox.Volume) bool { _, ok := v.MountOf(id); return !ok }), nil
}

// hasPrefixDir reports whether p lies strictly below dir.
func hasPrefixDir(p, dir string) bool { return strings.HasPrefix(p, dir+"/") }

// DefaultUID and DefaultGID own a new volume's root: the built-in images'
// sandbox user.
const (
	DefaultUID = 1000
	DefaultGID = 1000
)

// UsedBytes answers the bytes in use on the volume's filesystem, from
// statfs (cheap: no walk of its files; ext4's own metadata, a few MiB of
// journal and inode tables, counts as used), and false when it is not
// known: the volume is not ready, or its filesystem is not mounted on this
// host now (after a host restart until its first use, or a volume of
// another instance's host).
func (m *Manager) UsedBytes(v *sandbox.Volume) (int64, bool) {
	if v.State != sandbox.VolumeReady {
		return 0, false
	}
	return usedBytes(m.HostDir(v))
}
