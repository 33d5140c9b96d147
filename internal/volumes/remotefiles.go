package volumes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// The files API of volumes a provisioner keeps (driver.VolumeFiles): each
// call holds the volume for a helper of its own, has the provisioner start
// the helper mounting the volume (read-only for a read), makes its file
// calls to the helper's agent, whose one allowed root is the volume (so
// path confinement is the file gateway's: the agent refuses `..`,
// absolute paths and symlinks that leave the root), and removes the
// helper and drops the hold before it returns. A helper per call rather
// than one kept idle: the hold is exactly the call's, so a helper never
// makes a sandbox's writable mount wait, and no replica keeps state
// another must know of; the price is a Pod's start (about a second) per
// call.

// helperPrefix starts the holder id of a files helper; its creation time
// (Unix seconds) follows, then a random part.
const helperPrefix = "volfiles-"

// helperCallTimeout bounds one helper's life (its start, the call, the
// transfer of its data); a hold of a helper older than helperMaxAge is a
// crash's leftover, dropped by Sweep with its Pod.
const (
	helperStartTimeout = 2 * time.Minute
	helperCallTimeout  = 10 * time.Minute
	helperMaxAge       = 15 * time.Minute
)

// volumeFiles is the provisioner's helpers, nil when it has none.
func (m *Manager) volumeFiles() driver.VolumeFiles {
	vf, _ := m.cfg.Provisioner.(driver.VolumeFiles)
	return vf
}

func filesUnsupported(name string) error {
	return errdefs.WithCode(CodeFilesUnsupported, fmt.Errorf(
		"volume %q is kept by the cluster, not on this host, and this call on its files is not served without a sandbox: reach them through a sandbox that mounts it: %w", name, errdefs.ErrNotImplemented))
}

// newHolder is a helper's holder id made at now.
func newHolder(now time.Time) string {
	return helperPrefix + strconv.FormatInt(now.Unix(), 10) + "-" + strings.ToLower(strings.TrimPrefix(sandbox.NewID("h"), "h_"))
}

// helperStale reports whether holder is a files helper's made more than
// helperMaxAge before now.
func helperStale(holder string, now time.Time) bool {
	rest, ok := strings.CutPrefix(holder, helperPrefix)
	if !ok {
		return false
	}
	sec, _, _ := strings.Cut(rest, "-")
	n, err := strconv.ParseInt(sec, 10, 64)
	return err != nil || now.Sub(time.Unix(n, 0)) > helperMaxAge
}

// isHelper reports whether holder names a files helper.
func isHelper(holder string) bool { return strings.HasPrefix(holder, helperPrefix) }

// holdForFiles takes volume id for helper holder under the volume's row
// lock: a write needs no other writer, a read shares with readers (one
// writer or any number of readers, the helper counted). Else 409
// volume_busy.
func (m *Manager) holdForFiles(ctx context.Context, id, holder string, write bool) error {
	_, err := m.cfg.Store.UpdateVolume(ctx, id, m.cfg.Now(), func(x *sandbox.Volume) error {
		if x.State != sandbox.VolumeReady {
			return errdefs.WithCode(CodeVolumeNotReady, fmt.Errorf("volume %q is %s: %w", x.Name, x.State, errdefs.ErrConflict))
		}
		if w := x.Writer(); w != "" {
			return errdefs.WithCode(CodeBusy, fmt.Errorf("volume %q is mounted writable by %s: one writer or any number of readers: %w", x.Name, w, errdefs.ErrConflict))
		}
		x.Mounts = append(x.Mounts, sandbox.VolumeMount{SandboxID: holder, Path: driver.VolumeFilesRoot, ReadOnly: !write})
		return nil
	})
	return err
}

// withHelper runs fn against the agent of a helper mounting tenant's
// volume name (writable when write), holding the volume for it meanwhile.
func (m *Manager) withHelper(ctx context.Context, tenant, name string, write bool, fn func(ctx context.Context, c *agentclient.Client) error) error {
	vf := m.volumeFiles()
	v, err := m.ready(ctx, tenant, name)
	if err != nil {
		return err
	}
	holder := newHolder(m.cfg.Now())
	if err := m.holdForFiles(ctx, v.ID, holder, write); err != nil {
		return err
	}
	defer func() {
		// However the call ended: the helper goes, then the hold.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := vf.CloseVolumeFiles(cctx, holder); err != nil {
			m.log.Warn("volumes: removing a files helper", "volume", v.ID, "helper", holder, "err", err)
			return // the hold stays until Sweep finds the helper stale
		}
		if err := m.drop(cctx, v.ID, holder); err != nil {
			m.log.Warn("volumes: releasing a files helper's hold", "volume", v.ID, "helper", holder, "err", err)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, helperCallTimeout)
	defer cancel()
	dial, err := vf.OpenVolumeFiles(ctx, holder, v.ID, !write)
	if err != nil {
		return err
	}
	c := agentclient.NewNamed(agentclient.Dialer(dial), "files helper of volume "+v.ID)
	defer c.Close()
	sctx, scancel := context.WithTimeout(ctx, helperStartTimeout)
	_, err = c.WaitReady(sctx, 50*time.Millisecond)
	scancel()
	if err != nil {
		return fmt.Errorf("volume %q: its files helper did not answer: %w", name, errors.Join(err, errdefs.ErrUnavailable))
	}
	return remoteError(fn(ctx, c))
}

// remoteError gives an agent's answer the codes the host's files API
// gives (fileError): an escape is invalid_path, a full volume volume_full.
func remoteError(err error) error {
	if err == nil {
		return nil
	}
	switch errdefs.Code(err) {
	case agentproto.CodePathOutsideRoot, agentproto.CodeTooManySymlinks, agentproto.CodePathTooLong:
		return errdefs.WithCode(CodeInvalidPath, err) // the agent's 400
	case agentproto.CodeNoSpace, agentproto.CodeUploadTooLarge:
		return errdefs.WithCode(CodeFull, err) // the agent's 413
	}
	return err
}

// agentPath is the helper's path of r (a path local to the volume's root).
func agentPath(r string) string {
	if r == "." {
		return driver.VolumeFilesRoot
	}
	return driver.VolumeFilesRoot + "/" + r
}

// volumePath is the API's path of an agent's path.
func volumePath(p string) string {
	if p == driver.VolumeFilesRoot {
		return "/"
	}
	if r, ok := strings.CutPrefix(p, driver.VolumeFilesRoot+"/"); ok {
		return "/" + r
	}
	return p
}

func remoteInfo(i agentproto.FileInfo) FileInfo {
	p := volumePath(i.Path)
	name := i.Name
	if p == "/" {
		name = "/"
	}
	mt := i.ModTime.UTC()
	return FileInfo{Path: p, Name: name, Type: i.Type, Size: i.Size, Mode: i.Mode, ModTime: mt, AccessTime: mt, ChangeTime: mt,
		UID: i.UID, GID: i.GID, LinkTarget: i.LinkTarget, NameInvalidUTF8: i.NameInvalidUTF8}
}

func (m *Manager) remoteList(ctx context.Context, tenant, name, r string, limit int) (*FileList, error) {
	var out *FileList
	err := m.withHelper(ctx, tenant, name, false, func(ctx context.Context, c *agentclient.Client) error {
		l, err := c.ListFiles(ctx, agentPath(r), 1, limit)
		if err != nil {
			return err
		}
		out = &FileList{Path: shown(r), Entries: make([]FileInfo, 0, len(l.Entries)), Truncated: l.Truncated}
		for _, e := range l.Entries {
			out.Entries = append(out.Entries, remoteInfo(e))
		}
		return nil
	})
	return out, err
}

func (m *Manager) remoteStat(ctx context.Context, tenant, name, r string) (*FileInfo, error) {
	var out FileInfo
	err := m.withHelper(ctx, tenant, name, false, func(ctx context.Context, c *agentclient.Client) error {
		i, err := c.StatFile(ctx, agentPath(r))
		out = remoteInfo(i)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

func (m *Manager) remoteWrite(ctx context.Context, tenant, name, r string, perm fs.FileMode, overwrite bool, body io.Reader) (*FileWritten, error) {
	var out *FileWritten
	err := m.withHelper(ctx, tenant, name, true, func(ctx context.Context, c *agentclient.Client) error {
		if err := m.remoteMkdirs(ctx, c, path.Dir("/"+r)); err != nil {
			return err
		}
		res, err := c.WriteFile(ctx, agentclient.WriteFileRequest{Path: agentPath(r), Mode: fmt.Sprintf("%04o", perm), Overwrite: overwrite,
			MaxBytes: -1, Size: -1}, body)
		if err != nil {
			return err
		}
		out = &FileWritten{Path: volumePath(res.Path), Size: res.Size, SHA256: res.SHA256, Mode: res.Mode}
		return nil
	})
	return out, err
}

// remoteMkdirs makes the missing parents dir ("/a/b") of an upload.
func (m *Manager) remoteMkdirs(ctx context.Context, c *agentclient.Client, dir string) error {
	if dir == "/" {
		return nil
	}
	yes := true
	_, err := c.Mkdir(ctx, agentproto.MkdirRequest{Path: driver.VolumeFilesRoot + dir, Parents: &yes})
	return err
}

// remoteOpen copies file r of the volume into an unlinked temporary file
// of the service's host (below Config.Dir) and returns it, positioned at
// its start, with the volume file's size and time (the agent's
// Last-Modified, to the second): the callers answer
// ranges from it as from a host volume's file once the helper is gone.
func (m *Manager) remoteOpen(ctx context.Context, tenant, name, r string) (*os.File, fs.FileInfo, error) {
	var f *os.File
	var fi fs.FileInfo
	err := m.withHelper(ctx, tenant, name, false, func(ctx context.Context, c *agentclient.Client) error {
		// The agent opens it as the file gateway does: a symlink is
		// followed within the volume only, anything but a regular file
		// is refused.
		resp, err := c.ReadFile(ctx, http.MethodGet, agentPath(r), nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.Status != http.StatusOK {
			return fmt.Errorf("%s: the helper answered %d: %w", shown(r), resp.Status, errdefs.ErrInternal)
		}
		if err := os.MkdirAll(m.cfg.Dir, 0o711); err != nil {
			return fmt.Errorf("volumes dir: %w", err)
		}
		tmp, err := os.CreateTemp(m.cfg.Dir, ".download-")
		if err != nil {
			return fmt.Errorf("download of %s: %w", shown(r), err)
		}
		_ = os.Remove(tmp.Name())
		n, err := io.Copy(tmp, resp.Body)
		if err == nil {
			_, err = tmp.Seek(0, io.SeekStart)
		}
		if err != nil {
			tmp.Close()
			return fmt.Errorf("download of %s: %w", shown(r), errors.Join(err, errdefs.ErrUnavailable))
		}
		mtime, _ := http.ParseTime(resp.Header.Get("Last-Modified"))
		f, fi = tmp, remoteFileInfo{name: path.Base("/" + r), size: n, mode: 0o644, mtime: mtime}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return f, fi, nil
}

// remoteFileInfo is a volume file's description as its helper gave it.
type remoteFileInfo struct {
	name  string
	size  int64
	mode  fs.FileMode
	mtime time.Time
}

func (i remoteFileInfo) Name() string       { return i.name }
func (i remoteFileInfo) Size() int64        { return i.size }
func (i remoteFileInfo) Mode() fs.FileMode  { return i.mode }
func (i remoteFileInfo) ModTime() time.Time { return i.mtime }
func (i remoteFileInfo) IsDir() bool        { return false }
func (i remoteFileInfo) Sys() any           { return nil }

func (m *Manager) remoteDelete(ctx context.Context, tenant, name, r string, recursive bool) error {
	return m.withHelper(ctx, tenant, name, true, func(ctx context.Context, c *agentclient.Client) error {
		return c.DeleteFile(ctx, agentproto.DeleteRequest{Path: agentPath(r), Recursive: recursive})
	})
}

// sweepHelpers removes the files helpers (and their holds) that outlived
// helperMaxAge: a crash's leftovers.
func (m *Manager) sweepHelpers(ctx context.Context, now time.Time) {
	vf := m.volumeFiles()
	if vf == nil {
		return
	}
	list, err := vf.VolumeFilesHelpers(ctx)
	if err != nil {
		m.log.Warn("volumes: listing files helpers", "err", err)
		return
	}
	for _, h := range list {
		if helperStale(h, now) {
			if err := vf.CloseVolumeFiles(ctx, h); err != nil {
				m.log.Warn("volumes: removing a stale files helper", "helper", h, "err", err)
			}
		}
	}
}
