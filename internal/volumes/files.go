package volumes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// FileInfo describes one file of a volume (the shape of api.FileInfo).
type FileInfo struct {
	Path    string
	Name    string
	Type    string
	Size    int64
	Mode    string
	ModTime time.Time
	// AccessTime and ChangeTime are the inode's atime and ctime.
	AccessTime      time.Time
	ChangeTime      time.Time
	UID             int
	GID             int
	LinkTarget      string
	NameInvalidUTF8 bool
}

// FileList is a directory of a volume (the shape of api.FileList).
type FileList struct {
	Path      string
	Entries   []FileInfo
	Truncated bool
}

// FileWritten is an upload's result (the shape of api.FileWritten).
type FileWritten struct {
	Path   string
	Size   int64
	SHA256 string
	Mode   string
}

// DefaultListLimit and MaxListLimit bound a listing.
const (
	DefaultListLimit = 1000
	MaxListLimit     = 10000
)

// rel turns an API path ("/a/b", "a/b", "/" or "") into a path local to
// the volume's root ("." for the root); anything leaving it is 400.
func rel(p string) (string, error) {
	if strings.ContainsRune(p, 0) || len(p) > 4096 {
		return "", errdefs.WithCode(CodeInvalidPath, fmt.Errorf("path %.70q: %w", p, errdefs.ErrInvalidArgument))
	}
	r := strings.TrimLeft(p, "/")
	if r == "" {
		return ".", nil
	}
	if !filepath.IsLocal(r) {
		return "", errdefs.WithCode(CodeInvalidPath, fmt.Errorf("path %.70q leaves the volume: %w", p, errdefs.ErrInvalidArgument))
	}
	return filepath.Clean(r), nil
}

func shown(r string) string {
	if r == "." {
		return "/"
	}
	return "/" + filepath.ToSlash(r)
}

// fileError gives the host's answer its class; an escape attempt through
// a symlink is a 400 like any other.
func fileError(p string, err error) error {
	var errno syscall.Errno
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errdefs.WithCode(CodeFileNotFound, fmt.Errorf("%s: %w", p, errdefs.ErrNotFound))
	case errors.Is(err, fs.ErrExist):
		return errdefs.WithCode(CodeFileExists, fmt.Errorf("%s exists: %w", p, errdefs.ErrAlreadyExists))
	case errors.As(err, &errno) && (errno == syscall.ENOSPC || errno == syscall.EDQUOT):
		return errdefs.WithCode(CodeFull, fmt.Errorf("the volume is full writing %s: %w", p, errdefs.ErrTooLarge))
	case errors.As(err, &errno) && errno == syscall.ENOTDIR:
		return errdefs.WithCode(CodeNotADirectory, errdefs.Invalid("%s: a parent is not a directory", p))
	case errors.As(err, &errno) && errno == syscall.ENOTEMPTY:
		return errdefs.WithCode("directory_not_empty", fmt.Errorf("%s is a directory that is not empty (recursive deletes it): %w", p, errdefs.ErrConflict))
	case strings.Contains(err.Error(), "path escapes from parent"):
		// os.Root's refusal of a symlink or ".." that leaves the volume
		// (it has no error value of its own).
		return errdefs.WithCode(CodeInvalidPath, fmt.Errorf("%s leaves the volume: %w", p, errdefs.ErrInvalidArgument))
	}
	return fmt.Errorf("%s: %w", p, err)
}

// open returns tenant's volume name, ready and mounted, with its root.
func (m *Manager) open(ctx context.Context, tenant, name string) (*sandbox.Volume, *os.Root, error) {
	v, err := m.ready(ctx, tenant, name)
	if err != nil {
		return nil, nil, err
	}
	if m.cfg.Provisioner != nil {
		// A provisioner's volume served by helpers: only the calls of
		// remotefiles.go reach it.
		return nil, nil, filesUnsupported(name)
	}
	root, err := os.OpenRoot(m.HostDir(v))
	if err != nil {
		return nil, nil, fmt.Errorf("volume %q: %w", name, err)
	}
	return v, root, nil
}

func info(p string, fi fs.FileInfo, link string) FileInfo {
	out := FileInfo{Path: p, Name: fi.Name(), Size: fi.Size(), Mode: fmt.Sprintf("%04o", fi.Mode().Perm()), ModTime: fi.ModTime().UTC(),
		LinkTarget: link, NameInvalidUTF8: !utf8.ValidString(fi.Name())}
	if p == "/" {
		out.Name = "/"
	}
	switch t := fi.Mode().Type(); {
	case t == 0:
		out.Type = "file"
	case t&fs.ModeDir != 0:
		out.Type = "dir"
	case t&fs.ModeSymlink != 0:
		out.Type = "symlink"
	case t&fs.ModeNamedPipe != 0:
		out.Type = "fifo"
	case t&fs.ModeSocket != 0:
		out.Type = "socket"
	case t&fs.ModeDevice != 0:
		out.Type = "device"
	default:
		out.Type = "other"
	}
	out.AccessTime, out.ChangeTime = out.ModTime, out.ModTime
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		out.UID, out.GID = int(st.Uid), int(st.Gid)
		out.AccessTime, out.ChangeTime = statTimes(st)
	}
	return out
}

// ListFiles lists directory p of tenant's volume name (one level, sorted
// by name), at most limit entries (0: DefaultListLimit).
func (m *Manager) ListFiles(ctx context.Context, tenant, name, p string, limit int) (*FileList, error) {
	r, err := rel(p)
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	if m.volumeFiles() != nil {
		return m.remoteList(ctx, tenant, name, r, limit)
	}
	_, root, err := m.open(ctx, tenant, name)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	d, err := openNonBlocking(root, r)
	if err != nil {
		return nil, fileError(shown(r), err)
	}
	defer d.Close()
	if fi, err := d.Stat(); err != nil {
		return nil, fileError(shown(r), err)
	} else if !fi.IsDir() {
		return nil, errdefs.WithCode(CodeNotADirectory, errdefs.Invalid("%s is not a directory", shown(r)))
	}
	entries, err := d.ReadDir(-1)
	if err != nil {
		return nil, fileError(shown(r), err)
	}
	out := &FileList{Path: shown(r), Entries: []FileInfo{}}
	for _, e := range entries {
		if len(out.Entries) == limit {
			out.Truncated = true
			break
		}
		fi, err := e.Info()
		if err != nil {
			continue // gone meanwhile
		}
		ep := path.Join(shown(r), e.Name())
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			link, _ = root.Readlink(filepath.Join(r, e.Name()))
		}
		out.Entries = append(out.Entries, info(ep, fi, link))
	}
	return out, nil
}

// StatFile describes file p of tenant's volume name (a symlink itself).
func (m *Manager) StatFile(ctx context.Context, tenant, name, p string) (*FileInfo, error) {
	r, err := rel(p)
	if err != nil {
		return nil, err
	}
	if m.volumeFiles() != nil {
		return m.remoteStat(ctx, tenant, name, r)
	}
	_, root, err := m.open(ctx, tenant, name)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	fi, err := root.Lstat(r)
	if err != nil {
		return nil, fileError(shown(r), err)
	}
	link := ""
	if fi.Mode()&fs.ModeSymlink != 0 {
		link, _ = root.Readlink(r)
	}
	i := info(shown(r), fi, link)
	return &i, nil
}

// parseMode reads an octal permission ("0644"); "" is def.
func parseMode(s string, def fs.FileMode) (fs.FileMode, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil || n > 0o777 {
		return 0, errdefs.WithCode("invalid_mode", fmt.Errorf("mode %.20q: octal permission bits (0000 to 0777): %w", s, errdefs.ErrInvalidArgument))
	}
	return fs.FileMode(n), nil
}

// WriteFile writes body to file p of tenant's volume name, making missing
// parent directories: into a temporary file beside it, renamed into place
// once complete, so a failed or cut-off upload (a full volume, a client
// gone) leaves no partial file. The file and the directories it makes
// belong to the owner of the volume's root. A volume a sandbox holds
// writable is 409 volume_busy: its one writer is that sandbox.
func (m *Manager) WriteFile(ctx context.Context, tenant, name, p, mode string, overwrite bool, body io.Reader) (*FileWritten, error) {
	r, err := rel(p)
	if err != nil {
		return nil, err
	}
	if r == "." {
		return nil, errdefs.WithCode(CodeIsADirectory, errdefs.Invalid("/ is the volume's root"))
	}
	perm, err := parseMode(mode, 0o644)
	if err != nil {
		return nil, err
	}
	if m.volumeFiles() != nil {
		return m.remoteWrite(ctx, tenant, name, r, perm, overwrite, body)
	}
	v, root, err := m.open(ctx, tenant, name)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if w := v.Writer(); w != "" {
		return nil, errdefs.WithCode(CodeBusy, fmt.Errorf("volume %q is mounted writable by sandbox %s: write through it: %w", name, w, errdefs.ErrConflict))
	}
	owner, err := root.Stat(".")
	if err != nil {
		return nil, fileError("/", err)
	}
	st, _ := owner.Sys().(*syscall.Stat_t)
	uid, gid := int(st.Uid), int(st.Gid)
	if err := m.mkdirAll(root, filepath.Dir(r), uid, gid); err != nil {
		return nil, err
	}
	if fi, err := root.Lstat(r); err == nil {
		if fi.IsDir() {
			return nil, errdefs.WithCode(CodeIsADirectory, fmt.Errorf("%s is a directory: %w", shown(r), errdefs.ErrConflict))
		}
		if !overwrite {
			return nil, fileError(shown(r), fs.ErrExist)
		}
	}
	tmp := filepath.Join(filepath.Dir(r), ".genesis-upload-"+sandbox.NewID("tmp"))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, fileError(shown(r), err)
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			_ = root.Remove(tmp)
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), body)
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) || errors.Is(err, fs.ErrClosed) {
			return nil, fileError(shown(r), err)
		}
		return nil, fmt.Errorf("upload of %s: %w", shown(r), errors.Join(err, errdefs.ErrInvalidArgument))
	}
	if err := f.Sync(); err != nil {
		return nil, fileError(shown(r), err)
	}
	if err := f.Chmod(perm); err != nil {
		return nil, fileError(shown(r), err)
	}
	if err := f.Chown(uid, gid); err != nil {
		return nil, fileError(shown(r), err)
	}
	if err := f.Close(); err != nil {
		return nil, fileError(shown(r), err)
	}
	if err := root.Rename(tmp, r); err != nil {
		return nil, fileError(shown(r), err)
	}
	done = true
	return &FileWritten{Path: shown(r), Size: n, SHA256: hex.EncodeToString(h.Sum(nil)), Mode: fmt.Sprintf("%04o", perm)}, nil
}

// mkdirAll makes dir and its missing parents below root, owned by uid:gid.
func (m *Manager) mkdirAll(root *os.Root, dir string, uid, gid int) error {
	if dir == "." {
		return nil
	}
	var made []string
	for d := dir; d != "."; d = filepath.Dir(d) {
		fi, err := root.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				return errdefs.WithCode(CodeNotADirectory, errdefs.Invalid("%s is not a directory", shown(d)))
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fileError(shown(d), err)
		}
		made = append(made, d)
	}
	for i := len(made) - 1; i >= 0; i-- {
		if err := root.Mkdir(made[i], 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fileError(shown(made[i]), err)
		}
		if err := root.Lchown(made[i], uid, gid); err != nil {
			return fileError(shown(made[i]), err)
		}
	}
	return nil
}

// OpenFile opens regular file p of tenant's volume name for reading; the
// caller closes it (and answers ranges from it).
func (m *Manager) OpenFile(ctx context.Context, tenant, name, p string) (*os.File, fs.FileInfo, error) {
	r, err := rel(p)
	if err != nil {
		return nil, nil, err
	}
	if m.volumeFiles() != nil {
		return m.remoteOpen(ctx, tenant, name, r)
	}
	_, root, err := m.open(ctx, tenant, name)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	f, err := openNonBlocking(root, r)
	if err != nil {
		return nil, nil, fileError(shown(r), err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fileError(shown(r), err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, errdefs.WithCode(CodeIsADirectory, errdefs.Invalid("%s is not a regular file", shown(r)))
	}
	return f, fi, nil
}

// DeleteFile removes file or directory p of tenant's volume name (a
// directory with content only when recursive). A volume a sandbox holds
// writable is 409 volume_busy.
func (m *Manager) DeleteFile(ctx context.Context, tenant, name, p string, recursive bool) error {
	r, err := rel(p)
	if err != nil {
		return err
	}
	if r == "." {
		return errdefs.WithCode(CodeInvalidPath, errdefs.Invalid("the volume's root cannot be deleted (delete the volume)"))
	}
	if m.volumeFiles() != nil {
		return m.remoteDelete(ctx, tenant, name, r, recursive)
	}
	v, root, err := m.open(ctx, tenant, name)
	if err != nil {
		return err
	}
	defer root.Close()
	if w := v.Writer(); w != "" {
		return errdefs.WithCode(CodeBusy, fmt.Errorf("volume %q is mounted writable by sandbox %s: %w", name, w, errdefs.ErrConflict))
	}
	fi, err := root.Lstat(r)
	if err != nil {
		return fileError(shown(r), err)
	}
	if recursive {
		err = root.RemoveAll(r)
	} else {
		err = root.Remove(r)
	}
	var errno syscall.Errno
	if err != nil && fi.IsDir() && errors.As(err, &errno) && (errno == syscall.ENOTEMPTY || errno == syscall.EEXIST) {
		return errdefs.WithCode("directory_not_empty", fmt.Errorf("%s is a directory that is not empty (recursive deletes it): %w", shown(r), errdefs.ErrConflict))
	}
	if err != nil {
		return fileError(shown(r), err)
	}
	return nil
}

// openNonBlocking opens r for reading without blocking: a FIFO a sandbox
// left on the volume would otherwise hold the open (and the request)
// until a writer came. Callers check what they opened.
func openNonBlocking(root *os.Root, r string) (*os.File, error) {
	return root.OpenFile(r, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
