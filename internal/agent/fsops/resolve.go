package fsops

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"genesis.dev/sandbox/internal/agent/agentproto"
)

// Confined path resolution.
//
// Go's os.Root is the obvious tool, and it is not safe under gVisor: os.Root
// opens each intermediate directory with openat(O_NOFOLLOW|O_DIRECTORY) and
// relies on the kernel to refuse a symlink there (Linux answers ENOTDIR),
// but gVisor (runsc, 2026-09 and the Debian 2022 build) follows a trailing
// symlink to a directory in that call, so root.Open("link/passwd") with
// link -> /etc reads /etc/passwd. (Reproduced by TestFilesInContainers.)
//
// This resolver uses only calls that behave alike on Linux and gVisor: each
// component is opened with O_PATH|O_NOFOLLOW, which yields the object itself
// (a symlink included) without side effects, and fstat on that descriptor
// says what it is. Directories are descended through their descriptors, never
// through a path string; ".." pops the descriptor stack of the walk (so it
// can never climb above the root); a symlink is read from its own descriptor
// (readlinkat(fd, "")) and followed only if it is relative, its target then
// being walked from the link's directory by the same rules. The final
// operation is one *at call on the directory descriptor with one name and
// O_NOFOLLOW (or its equivalent), so a symlink swapped in after the walk
// makes it fail, not escape.

const (
	oPath       = 0x200000 // O_PATH, not exported by package syscall
	atRemoveDir = 0x200    // AT_REMOVEDIR
	atEmptyPath = 0x1000   // AT_EMPTY_PATH
	maxSymlinks = 40       // as Linux
	maxRetries  = 8        // re-walks after a symlink was swapped in under an operation
)

// errEscape is the error of a path that resolves outside its root.
var errEscape = errors.New("path escapes from the allowed root")

// tree is an allowed root opened for confined resolution.
type Tree struct {
	root string // absolute path of the root (for names and messages)
	fd   int
}

// openTree opens the allowed root root (a trusted, configured path).
func openTree(root string) (*Tree, error) {
	fd, err := openat(-100, root, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0) // AT_FDCWD
	if err != nil {
		return nil, &fs.PathError{Op: "open root", Path: root, Err: err}
	}
	return &Tree{root: root, fd: fd}, nil
}

func (t *Tree) close() { syscall.Close(t.fd) }

// loc is a resolved location: name in the directory dir. name is "." when
// the location is dir itself. st is the lstat of the location when known.
type loc struct {
	t     *Tree
	dir   int
	name  string
	st    syscall.Stat_t
	known bool // st is valid (the object existed when walked)
	// canon is the path of dir relative to the root as the walk really
	// went (symlinks resolved), "." for the root.
	canon string
}

// close releases dir unless it is the root's descriptor.
func (l *loc) close() {
	if l.dir != l.t.fd && l.dir >= 0 {
		syscall.Close(l.dir)
	}
	l.dir = -1
}

// resolve walks rel (a clean local path) from the root. Symlinks on the way
// are followed while they stay inside the root; a final symlink is followed
// only with follow. With asDir the whole path must be a directory and the
// result is that directory itself (name "."); with create, missing
// directories on the way are made (0755). The caller closes the result.
func (t *Tree) resolve(rel string, follow, asDir, create bool) (res loc, err error) {
	stack := []int{t.fd}
	names := []string{} // the components of the walk, parallel to stack[1:]
	here := func() string {
		if len(names) == 0 {
			return "."
		}
		return strings.Join(names, "/")
	}
	defer func() {
		for _, fd := range stack {
			if fd != t.fd && (err != nil || fd != res.dir) {
				syscall.Close(fd)
			}
		}
		if err != nil {
			err = &fs.PathError{Op: "resolve", Path: rel, Err: err}
		}
	}()
	parts := splitRel(rel)
	links, steps := 0, 0
	for len(parts) > 0 {
		if steps++; steps > 4*maxSymlinks+agentproto.MaxPathBytes {
			return loc{}, syscall.ELOOP // a directory that keeps vanishing while it is made
		}
		c, rest := parts[0], parts[1:]
		top := stack[len(stack)-1]
		switch c {
		case "", ".":
			parts = rest
			continue
		case "..":
			if len(stack) == 1 {
				return loc{}, errEscape
			}
			syscall.Close(top)
			stack = stack[:len(stack)-1]
			names = names[:len(names)-1]
			parts = rest
			continue
		}
		last := len(rest) == 0 && !asDir
		if last && !follow {
			return loc{t: t, dir: top, name: c, canon: here()}, nil
		}
		fd, err := openat(top, c, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err == syscall.ENOENT {
			if last {
				return loc{t: t, dir: top, name: c, canon: here()}, nil
			}
			if create {
				if err := syscall.Mkdirat(top, c, 0o755); err != nil && err != syscall.EEXIST {
					return loc{}, err
				}
				continue // open what is there now
			}
		}
		if err != nil {
			return loc{}, err
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			syscall.Close(fd)
			return loc{}, err
		}
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFLNK:
			target, err := readlinkat(fd, "")
			syscall.Close(fd)
			if err != nil {
				return loc{}, err
			}
			if links++; links > maxSymlinks {
				return loc{}, syscall.ELOOP
			}
			if target == "" {
				return loc{}, syscall.ENOENT
			}
			if path.IsAbs(target) {
				return loc{}, errEscape
			}
			// The target is walked from the link's directory (top).
			parts = append(splitRel(target), rest...)
		case syscall.S_IFDIR:
			stack = append(stack, fd)
			names = append(names, c)
			parts = rest
			if last {
				return loc{t: t, dir: fd, name: ".", st: st, known: true, canon: here()}, nil
			}
		default:
			syscall.Close(fd)
			if last {
				return loc{t: t, dir: top, name: c, st: st, known: true, canon: here()}, nil
			}
			return loc{}, syscall.ENOTDIR
		}
	}
	// Nothing left: the root itself, or a path that ended going up.
	top := stack[len(stack)-1]
	l := loc{t: t, dir: top, name: ".", canon: here()}
	if err := syscall.Fstat(top, &l.st); err == nil {
		l.known = true
	}
	return l, nil
}

func splitRel(p string) []string {
	if p == "" || p == "." {
		return nil
	}
	return strings.Split(p, "/")
}

// lstat stats the location without following a final symlink.
func (l *loc) lstat() (fs.FileInfo, error) {
	fd, err := openat(l.dir, l.name, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), l.name)
	defer f.Close()
	return f.Stat()
}

// readlink reads the location's symlink.
func (l *loc) readlink() (string, error) { return readlinkat(l.dir, l.name) }

// open opens the location with flags plus O_NOFOLLOW (a symlink swapped in
// after the walk yields ELOOP).
func (l *loc) open(flags int, perm uint32) (*os.File, error) {
	fd, err := openat(l.dir, l.name, flags|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, perm)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path.Join(l.t.root, l.name)), nil
}

// openFollow resolves rel following every symlink inside the root and opens
// the result with flags. check, if not nil, vets the walked object before it
// is opened (so FIFOs and devices are never opened) and the opened file.
func (t *Tree) openFollow(rel string, flags int, check func(fs.FileMode) error) (*os.File, error) {
	for range maxRetries {
		l, err := t.resolve(rel, true, false, false)
		if err != nil {
			return nil, err
		}
		if !l.known {
			l.close()
			return nil, &fs.PathError{Op: "open", Path: rel, Err: syscall.ENOENT}
		}
		if check != nil {
			if err := check(modeOf(l.st.Mode)); err != nil {
				l.close()
				return nil, err
			}
		}
		fd, err := openat(l.dir, l.name, flags|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		l.close()
		if err == syscall.ELOOP {
			continue // swapped for a symlink since the walk: walk again
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
		}
		if check != nil {
			var st syscall.Stat_t
			err := syscall.Fstat(fd, &st)
			if err == nil {
				err = check(modeOf(st.Mode))
			}
			if err != nil {
				syscall.Close(fd)
				return nil, err
			}
		}
		// O_NONBLOCK served the open only (a FIFO swapped in must not
		// block it); os.NewFile would put a non-blocking descriptor in the
		// poller, which gVisor accepts for regular files and then serves
		// reads through it slowly.
		if flags&syscall.O_NONBLOCK != 0 {
			if err := syscall.SetNonblock(fd, false); err != nil {
				syscall.Close(fd)
				return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
			}
		}
		return os.NewFile(uintptr(fd), path.Join(t.root, rel)), nil
	}
	return nil, &fs.PathError{Op: "open", Path: rel, Err: syscall.ELOOP}
}

// chmod sets the mode of rel, following symlinks inside the root. It changes
// the object opened with O_PATH|O_NOFOLLOW through /proc/self/fd (so it
// works for files the user cannot read), or with fchmod when /proc is absent.
func (t *Tree) chmod(rel string, mode fs.FileMode) (fs.FileInfo, error) {
	for range maxRetries {
		l, err := t.resolve(rel, true, false, false)
		if err != nil {
			return nil, err
		}
		fd, err := openat(l.dir, l.name, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		l.close()
		if err != nil {
			return nil, &fs.PathError{Op: "chmod", Path: rel, Err: err}
		}
		f := os.NewFile(uintptr(fd), rel)
		fi, err := f.Stat()
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			f.Close()
			continue // swapped since the walk
		}
		if err == nil {
			err = os.Chmod("/proc/self/fd/"+strconv.Itoa(fd), mode)
			if errors.Is(err, fs.ErrNotExist) {
				err = t.fchmod(rel, mode)
			}
		}
		if err == nil {
			fi, err = f.Stat()
		}
		f.Close()
		return fi, err
	}
	return nil, &fs.PathError{Op: "chmod", Path: rel, Err: syscall.ELOOP}
}

// fchmod is chmod without /proc: open for reading, then fchmod.
func (t *Tree) fchmod(rel string, mode fs.FileMode) error {
	f, err := t.openFollow(rel, syscall.O_RDONLY|syscall.O_NONBLOCK, func(m fs.FileMode) error {
		if !m.IsRegular() && !m.IsDir() {
			return &fs.PathError{Op: "chmod", Path: rel, Err: syscall.EPERM}
		}
		return nil
	})
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Chmod(mode)
}

// removeAll removes name in dir and, if it is a directory, everything in
// it, never following symlinks: every directory is entered through the
// descriptor of the object that was stat'ed.
func removeAll(dir int, name string) error {
	err := unlinkat(dir, name, 0)
	if err == nil || err == syscall.ENOENT {
		return nil
	}
	if err != syscall.EISDIR && err != syscall.EPERM {
		return err
	}
	for range maxRetries {
		fd, err := openat(dir, name, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			syscall.Close(fd)
			if err != nil {
				return err
			}
			return unlinkat(dir, name, 0) // no longer a directory
		}
		rd, err := openat(fd, ".", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			syscall.Close(fd)
			return err
		}
		f := os.NewFile(uintptr(rd), name)
		names, err := f.Readdirnames(-1)
		f.Close()
		if err == nil {
			for _, n := range names {
				if err = removeAll(fd, n); err != nil {
					break
				}
			}
		}
		syscall.Close(fd)
		if err != nil {
			return err
		}
		err = unlinkat(dir, name, atRemoveDir)
		if err != syscall.ENOTEMPTY && err != syscall.EEXIST {
			return err
		}
		// Something was added meanwhile: go again.
	}
	return syscall.ENOTEMPTY
}

// modeOf converts a stat mode to an fs.FileMode.
func modeOf(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & syscall.S_IFMT {
	case syscall.S_IFDIR:
		mode |= fs.ModeDir
	case syscall.S_IFLNK:
		mode |= fs.ModeSymlink
	case syscall.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		mode |= fs.ModeSocket
	case syscall.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if m&syscall.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// Raw *at system calls package syscall does not export (on every arch).

func openat(dir int, name string, flags int, perm uint32) (int, error) {
	for {
		fd, err := syscall.Openat(dir, name, flags, perm)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

func readlinkat(dir int, name string) (string, error) {
	for size := 256; size <= 1<<16; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dir, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
	return "", syscall.ENAMETOOLONG
}

func unlinkat(dir int, name string, flags int) error { return unix.Unlinkat(dir, name, flags) }

func linkat(olddir int, oldname string, newdir int, newname string) error {
	return unix.Linkat(olddir, oldname, newdir, newname, 0)
}

func symlinkat(target string, dir int, name string) error { return unix.Symlinkat(target, dir, name) }
