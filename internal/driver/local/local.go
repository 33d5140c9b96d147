package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/diskquota"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/nofollow"
)

// maxSocketPath is the longest Unix socket path Linux accepts.
const maxSocketPath = 107

// Config configures a Sandboxer.
type Config struct {
	// Driver runs the containers.
	Driver driver.Driver
	// Root is the directory holding one directory per sandbox.
	Root string
	// AgentDir is the host directory holding the genesis-agent binary,
	// bind-mounted read-only into every sandbox.
	AgentDir string
	Logger   *slog.Logger
}

// Sandboxer places sandboxes on this host. Safe for concurrent use.
type Sandboxer struct {
	d        driver.Driver
	root     string
	agentDir string
	quota    *diskquota.Manager
	log      *slog.Logger
}

var (
	_ driver.Sandboxer         = (*Sandboxer)(nil)
	_ driver.QuotaReporter     = (*Sandboxer)(nil)
	_ driver.HostDirs          = (*Sandboxer)(nil)
	_ driver.ContainerReplacer = (*Sandboxer)(nil)
)

// New returns a Sandboxer; it creates nothing until the first sandbox.
func New(cfg Config) (*Sandboxer, error) {
	if cfg.Driver == nil || cfg.AgentDir == "" || !filepath.IsAbs(cfg.Root) {
		return nil, errdefs.Invalid("local sandboxer: driver, agent dir and an absolute root are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	q, err := diskquota.New(diskquota.Config{Root: cfg.Root, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	return &Sandboxer{d: cfg.Driver, root: filepath.Clean(cfg.Root), agentDir: cfg.AgentDir, quota: q, log: cfg.Logger}, nil
}

// SandboxDir is sandbox id's directory.
func (l *Sandboxer) SandboxDir(id string) string { return filepath.Join(l.root, id) }

func (l *Sandboxer) socketPath(id string) string {
	return filepath.Join(l.SandboxDir(id), "run", driver.AgentSocketRel)
}

func (l *Sandboxer) workspaceImage(id string) string {
	return filepath.Join(l.SandboxDir(id), "workspace.img")
}

func (l *Sandboxer) workspaceDir(id string) string {
	return filepath.Join(l.SandboxDir(id), "workspace")
}

// AgentAddress is the agent's socket path.
func (l *Sandboxer) AgentAddress(id string) string { return l.socketPath(id) }

// AgentDialer dials the agent's Unix socket. The run directory belongs
// to the sandbox user, so the sandbox can put anything at the socket's
// name: a symlink to another sandbox's socket, a file. The dialer follows
// none of it (nofollow.DialUnix): only a socket is dialled, and a refusal
// is logged as a security event.
func (l *Sandboxer) AgentDialer(id string) driver.Dialer {
	path := l.socketPath(id)
	d := &net.Dialer{Timeout: 5 * time.Second}
	return func(ctx context.Context) (net.Conn, error) {
		c, err := nofollow.DialUnix(ctx, d, path)
		if errors.Is(err, nofollow.ErrNotSocket) {
			l.log.Warn("security: the agent's socket was replaced by something that is not a socket; not followed",
				"sandbox", id, "path", path, "err", err)
		}
		if err != nil {
			// Callers' errors reach tenants: the host path (and so the data
			// dir) is named as the sandbox sees it.
			return nil, hostPathHidden{err: err, host: path, seen: driver.AgentRunDir + "/" + driver.AgentSocketRel}
		}
		return c, nil
	}
}

// hostPathHidden is err with a host path replaced by the sandbox's name
// for it; errors.Is and As see err.
type hostPathHidden struct {
	err        error
	host, seen string
}

func (e hostPathHidden) Error() string { return strings.ReplaceAll(e.err.Error(), e.host, e.seen) }
func (e hostPathHidden) Unwrap() error { return e.err }

// mountReacher is the driver's optional answer to whether file systems
// this process mounts below dir are seen by the containers it binds dir
// into (the Docker driver's, when the service runs in a container).
type mountReacher interface {
	MountsReach(dir string) (bool, string)
}

// QuotaAvailable says whether loop-mounted workspace quotas work here: the
// driver's containers would see them (asked first: without that nothing
// else helps), and this host can make them.
func (l *Sandboxer) QuotaAvailable() (bool, string) {
	if r, ok := l.d.(mountReacher); ok {
		if ok, why := r.MountsReach(l.root); !ok {
			return false, why
		}
	}
	return l.quota.Available()
}

// CreateSandbox makes the sandbox's directories (the workspace owned by
// spec.UID:GID, quota-limited when spec.DiskMB is set) and its container,
// with the agent as PID 1 listening on a socket in the run directory.
func (l *Sandboxer) CreateSandbox(ctx context.Context, spec driver.SandboxSpec) (cid string, err error) {
	id := spec.ID
	if n := len(l.socketPath(id)); n > maxSocketPath {
		return "", fmt.Errorf("agent socket path is %d bytes, over the %d-byte Unix limit; use a shorter --data-dir: %w", n, maxSocketPath, errdefs.ErrFailedPrecondition)
	}
	if err := os.MkdirAll(l.root, 0o711); err != nil {
		return "", fmt.Errorf("sandboxes dir: %w", err)
	}
	dir := l.SandboxDir(id)
	runDir, wsDir := filepath.Join(dir, "run"), l.workspaceDir(id)
	defer func() {
		if err != nil {
			if rerr := l.removeDir(id); rerr != nil {
				l.log.Error("removing the directory of a failed create", "sandbox", id, "err", rerr)
			}
		}
	}()
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o711}, {runDir, 0o700}, {wsDir, 0o700}} {
		// The workspace is the sandbox user's alone on the host too: what the
		// sandbox leaves in it (a set-user-ID program of its uid, say) is no
		// other host user's to reach. Its processes run as that user.
		// The directory itself may hold the network's resolver file already.
		if err := os.Mkdir(d.path, d.mode); err != nil && (d.path != dir || !errors.Is(err, fs.ErrExist)) {
			return "", fmt.Errorf("sandbox dir: %w", err)
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return "", fmt.Errorf("sandbox dir: %w", err)
		}
		if d.path != dir {
			if err := os.Chown(d.path, spec.UID, spec.GID); err != nil {
				return "", fmt.Errorf("sandbox dir owner: %w", err)
			}
		}
	}
	if spec.DiskMB > 0 {
		if err := l.quota.Create(ctx, diskquota.Spec{Image: l.workspaceImage(id), Dir: wsDir,
			SizeMB: spec.DiskMB, UID: spec.UID, GID: spec.GID}); err != nil {
			return "", err
		}
	}
	return l.NewContainer(ctx, spec)
}

// NewContainer makes the container of sandbox spec.ID on its existing
// directories: the agent as PID 1 listening on a socket in the run
// directory, the workspace at /workspace.
func (l *Sandboxer) NewContainer(ctx context.Context, spec driver.SandboxSpec) (string, error) {
	id := spec.ID
	c := spec.Container
	if c.Restore != nil && c.Restore.ImagePath != "" {
		if err := l.placeSocket(id, spec.UID, spec.GID); err != nil {
			return "", err
		}
	}
	c.Cmd = []string{driver.AgentBinary, "serve", "--socket", driver.AgentRunDir + "/" + driver.AgentSocketRel}
	c.Mounts = append([]driver.Mount{
		{Source: l.agentDir, Target: driver.AgentMountDir, ReadOnly: true},
		{Source: filepath.Join(l.SandboxDir(id), "run"), Target: driver.AgentRunDir},
		{Source: l.workspaceDir(id), Target: "/workspace"},
	}, c.Mounts...)
	return l.d.Create(ctx, c)
}

// RemoveContainer removes the sandbox's container and keeps its
// directories.
func (l *Sandboxer) RemoveContainer(ctx context.Context, id, containerID string) error {
	if containerID == "" {
		containerID = "genesis-" + id
	}
	return l.d.Remove(ctx, containerID)
}

// WorkspaceDir is the host directory mounted at /workspace.
func (l *Sandboxer) WorkspaceDir(id string) string { return l.workspaceDir(id) }

// RunDir is the host directory of the agent's socket.
func (l *Sandboxer) RunDir(id string) string { return filepath.Join(l.SandboxDir(id), "run") }

// RemoveSandbox removes the container and the sandbox's directory.
func (l *Sandboxer) RemoveSandbox(ctx context.Context, id, containerID string) error {
	if containerID == "" {
		containerID = "genesis-" + id
	}
	var errs []error
	if err := l.d.Remove(ctx, containerID); err != nil {
		errs = append(errs, fmt.Errorf("removing container: %w", err))
	}
	if err := l.removeDir(id); err != nil {
		errs = append(errs, fmt.Errorf("removing sandbox dir: %w", err))
	}
	return errors.Join(errs...)
}

// removeDir releases the workspace quota (if any) and deletes the
// sandbox's directory. If the workspace cannot be unmounted the directory
// is kept: removing it would reach into the mounted filesystem.
func (l *Sandboxer) removeDir(id string) error {
	img := l.workspaceImage(id)
	if _, err := os.Lstat(img); err == nil {
		if err := l.quota.Remove(img, l.workspaceDir(id)); err != nil {
			return err
		}
	}
	return os.RemoveAll(l.SandboxDir(id))
}

// Recover unmounts the workspaces of sandboxes keep says are gone.
func (l *Sandboxer) Recover(keep func(id string) bool) (int, error) {
	return l.quota.Recover(func(dir string) bool { return keep(filepath.Base(filepath.Dir(dir))) })
}

// Sweep removes the directories of sandboxes keep says are gone.
func (l *Sandboxer) Sweep(keep func(id string, age time.Duration) bool) int {
	entries, err := os.ReadDir(l.root)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		var age time.Duration
		if info, err := e.Info(); err == nil {
			age = time.Since(info.ModTime())
		} else if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if keep(e.Name(), age) {
			continue
		}
		if err := l.removeDir(e.Name()); err != nil {
			l.log.Warn("removing stale sandbox dir", "sandbox", e.Name(), "err", err)
		} else {
			n++
		}
	}
	return n
}

// placeSocket leaves a socket file where the agent listens, in a run
// directory it has not listened in yet: the saved state of a sandbox
// restored there still names the agent's socket (gVisor re-walks the files
// its processes knew), and a restore into a directory without it fails.
// The restored agent replaces it with its own.
func (l *Sandboxer) placeSocket(id string, uid, gid int) error {
	p := l.socketPath(id)
	isSock, exists, err := nofollow.IsSocket(p)
	switch {
	case err != nil:
		return fmt.Errorf("placing the agent's socket for a restore: %w", err)
	case isSock:
		return nil
	case exists: // what the sandbox left there (a symlink, a file) is not restored into
		l.log.Warn("security: something other than a socket at the agent's socket; removed", "sandbox", id, "path", p)
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("placing the agent's socket for a restore: %v: %w", err, errdefs.ErrUnavailable)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
	if err != nil {
		return fmt.Errorf("placing the agent's socket for a restore: %v: %w", err, errdefs.ErrUnavailable)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if err := os.Lchown(p, uid, gid); err != nil {
		return fmt.Errorf("placing the agent's socket for a restore: %v: %w", err, errdefs.ErrUnavailable)
	}
	return nil
}
