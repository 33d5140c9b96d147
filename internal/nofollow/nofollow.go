package nofollow

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"genesis.dev/sandbox/internal/errdefs"
)

// ErrNotSocket marks a dial refused because the path is not a socket (a
// symlink, a regular file, a directory): something other than the agent
// put it there. Its class is ErrFailedPrecondition.
var ErrNotSocket = errdefs.Mark(errors.New("not a socket"), errdefs.ErrFailedPrecondition)

// ErrNotRegular marks a file creation refused because something other than
// a regular file (a symlink, a FIFO, a socket, a directory) holds the
// name. Its class is ErrFailedPrecondition.
var ErrNotRegular = errdefs.Mark(errors.New("not a regular file"), errdefs.ErrFailedPrecondition)

// DialUnix connects to the Unix socket at path. The last component is
// opened with O_PATH|O_NOFOLLOW and must be a socket; the connection is
// made through /proc/self/fd to exactly the inode opened, so a swap after
// the check changes nothing. A symlink or anything else that is not a
// socket fails with ErrNotSocket; a missing path with ErrUnavailable.
func DialUnix(ctx context.Context, d *net.Dialer, path string) (net.Conn, error) {
	// O_PATH|O_NOFOLLOW opens a symlink itself, which fstat then names.
	fd, err := unix.Open(path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %v: %w", path, err, errdefs.ErrUnavailable)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("dial %s: stat: %v: %w", path, err, errdefs.ErrUnavailable)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("dial %s: file type %s, refused: %w", path, typeName(st.Mode), ErrNotSocket)
	}
	if d == nil {
		d = &net.Dialer{}
	}
	c, err := d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %v: %w", path, err, errdefs.ErrUnavailable)
	}
	return c, nil
}

// CreateFile makes an empty regular file name (one component) in dir,
// mode perm, replacing a symlink or an earlier regular file of that name
// and never following one. dir itself is opened without following a
// symlink. Another kind of file holding the name fails with ErrNotRegular.
func CreateFile(dir, name string, perm os.FileMode) error {
	if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
		return errdefs.Invalid("create %q in %s: not one path component", name, dir)
	}
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("create %s in %s: open the directory: %v: %w", name, dir, err, errdefs.ErrUnavailable)
	}
	defer unix.Close(dfd)
	p := filepath.Join(dir, name)
	for try := 0; ; try++ {
		var st unix.Stat_t
		switch err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); {
		case err == nil:
			if t := st.Mode & unix.S_IFMT; t != unix.S_IFREG && t != unix.S_IFLNK {
				return fmt.Errorf("create %s: file type %s holds the name: %w", p, typeName(st.Mode), ErrNotRegular)
			}
			if err := unix.Unlinkat(dfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("create %s: remove what was there: %v: %w", p, err, errdefs.ErrUnavailable)
			}
		case !errors.Is(err, unix.ENOENT):
			return fmt.Errorf("create %s: stat: %v: %w", p, err, errdefs.ErrUnavailable)
		}
		fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
		if err == nil {
			unix.Close(fd)
			return nil
		}
		// Something took the name in between: look again, once.
		if !errors.Is(err, unix.EEXIST) || try > 0 {
			return fmt.Errorf("create %s: %v: %w", p, err, errdefs.ErrUnavailable)
		}
	}
}

// IsSocket reports whether path's last component, not followed, is a
// socket; a missing path is not an error.
func IsSocket(path string) (ok, exists bool, err error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, false, nil
		}
		return false, false, fmt.Errorf("stat %s: %v: %w", path, err, errdefs.ErrUnavailable)
	}
	return st.Mode&unix.S_IFMT == unix.S_IFSOCK, true, nil
}

// typeName names the file type in mode.
func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFREG:
		return "regular file"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "device"
	}
	return "unknown"
}
