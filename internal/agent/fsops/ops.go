package fsops

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// The file operations. Each resolves its paths with the confined resolver
// of files_resolve.go (never a path string handed to the kernel whole) and
// runs in the agent, that is inside the sandbox as the sandbox user.

// fileErr maps a file-system error of op on p (as the caller named it) to an
// error class and problem code.
func fileErr(op, p string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, errEscape) {
		return errdefs.WithCode(agentproto.CodePathOutsideRoot, fmt.Errorf(
			"%s %q: resolves outside the allowed root (a symlink leads out): %w", op, p, errdefs.ErrInvalidArgument))
	}
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		if errdefs.Code(err) != "internal" { // already classified
			return err
		}
		return fmt.Errorf("%s %q: %v: %w", op, p, err, errdefs.ErrInternal)
	}
	class, code := errdefs.ErrInternal, ""
	switch errno {
	case syscall.ENOENT:
		class, code = errdefs.ErrNotFound, agentproto.CodeFileNotFound
	case syscall.EEXIST:
		class, code = errdefs.ErrConflict, agentproto.CodeFileExists
	case syscall.ENOTEMPTY:
		class, code = errdefs.ErrConflict, agentproto.CodeDirNotEmpty
	case syscall.ENOTDIR:
		class, code = errdefs.ErrConflict, agentproto.CodeNotADirectory
	case syscall.EISDIR:
		class, code = errdefs.ErrConflict, agentproto.CodeIsADirectory
	case syscall.EACCES, syscall.EPERM, syscall.EROFS:
		class, code = errdefs.ErrPermissionDenied, agentproto.CodePermissionDenied
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG:
		class, code = errdefs.ErrTooLarge, agentproto.CodeNoSpace
	case syscall.ENAMETOOLONG:
		class, code = errdefs.ErrInvalidArgument, agentproto.CodePathTooLong
	case syscall.ELOOP:
		class, code = errdefs.ErrInvalidArgument, agentproto.CodeTooManySymlinks
	case syscall.EINVAL, syscall.EXDEV, syscall.EBUSY:
		class = errdefs.ErrInvalidArgument
	}
	// The errno's text says what happened; the class adds nothing to it.
	err = errdefs.Mark(fmt.Errorf("%s %q: %v", op, p, errno), class)
	if code != "" {
		err = errdefs.WithCode(code, err)
	}
	return err
}

// notRegular refuses a file that is not a regular file.
func notRegular(op, p string, m fs.FileMode) error {
	if m.IsDir() {
		return errdefs.WithCode(agentproto.CodeIsADirectory, fmt.Errorf("%s %q: is a directory: %w", op, p, errdefs.ErrConflict))
	}
	return errdefs.WithCode(agentproto.CodeNotRegularFile, fmt.Errorf(
		"%s %q: is a %s, not a regular file: %w", op, p, agentproto.FileType(m), errdefs.ErrInvalidArgument))
}

// rootItself refuses an operation on an allowed root itself.
func rootItself(op, display string) error {
	return errdefs.WithCode(agentproto.CodeRootNotAllowed, errdefs.Invalid("%s %q: is an allowed root", op, display))
}

// openTreeFor opens an allowed root for an operation.
func openTreeFor(root string) (*Tree, error) {
	t, err := openTree(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, errdefs.WithCode(agentproto.CodeFileNotFound, fmt.Errorf("allowed root %s does not exist: %w", root, errdefs.ErrNotFound))
		}
		return nil, fileErr("open root", root, err)
	}
	return t, nil
}

// fileInfo describes fi found at rel in root; link is a symlink's target.
func fileInfo(root, rel string, fi fs.FileInfo, link string) agentproto.FileInfo {
	p := agentproto.JoinRoot(root, rel)
	info := agentproto.FileInfo{
		Path:       p,
		Name:       path.Base(p),
		Type:       agentproto.FileType(fi.Mode()),
		Size:       fi.Size(),
		Mode:       agentproto.FormatMode(fi.Mode()),
		ModTime:    fi.ModTime().UTC(),
		LinkTarget: link,
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		info.UID, info.GID = int(st.Uid), int(st.Gid)
	}
	if !utf8.ValidString(info.Name) {
		info.NameInvalidUTF8 = true
	}
	info.Name = strings.ToValidUTF8(info.Name, "\uFFFD")
	info.Path = strings.ToValidUTF8(info.Path, "\uFFFD")
	info.LinkTarget = strings.ToValidUTF8(info.LinkTarget, "\uFFFD")
	return info
}

// statPath is FileInfo of rel without following a final symlink.
func statPath(t *Tree, rel, display string) (agentproto.FileInfo, error) {
	l, err := t.resolve(rel, false, false, false)
	if err != nil {
		return agentproto.FileInfo{}, fileErr("stat", display, err)
	}
	defer l.close()
	return statLoc(&l, rel, display)
}

func statLoc(l *loc, rel, display string) (agentproto.FileInfo, error) {
	fi, err := l.lstat()
	if err != nil {
		return agentproto.FileInfo{}, fileErr("stat", display, err)
	}
	link := ""
	if fi.Mode()&fs.ModeSymlink != 0 {
		link, _ = l.readlink()
	}
	return fileInfo(l.t.root, rel, fi, link), nil
}

// fileETag is a strong validator of a file's content: inode, size and
// modification time in nanoseconds. A rewrite through the API always makes
// a new inode (temp file + rename).
func fileETag(fi fs.FileInfo) string {
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = st.Ino
	}
	return fmt.Sprintf(`"%x-%x-%x"`, ino, fi.Size(), fi.ModTime().UnixNano())
}

// writeSpec is one file write.
type writeSpec struct {
	root, rel string
	display   string
	mode      fs.FileMode
	overwrite bool
	maxBytes  int64 // < 0: no limit
}

// errTooLarge is the class error of a body over maxBytes.
func errTooLarge(display string, max int64) error {
	return errdefs.WithCode(agentproto.CodeUploadTooLarge, fmt.Errorf(
		"write %q: body is over the %d-byte limit: %w", display, max, errdefs.ErrTooLarge))
}

// writeFile streams body into a new temporary file in the target's
// directory, hashing it, and renames it into place (or links it, without
// overwrite), so readers see the old content or the whole new one; a
// symlink at the target is replaced, never followed. Missing parents are
// created. On any failure the temporary file is removed and the target is
// untouched.
func writeFile(w writeSpec, body io.Reader, buf []byte) (agentproto.FileWriteResult, error) {
	if w.rel == "." {
		return agentproto.FileWriteResult{}, errdefs.WithCode(agentproto.CodeIsADirectory,
			fmt.Errorf("write %q: is an allowed root directory: %w", w.display, errdefs.ErrConflict))
	}
	t, err := openTreeFor(w.root)
	if err != nil {
		return agentproto.FileWriteResult{}, err
	}
	defer t.close()
	return writeInTree(t, w, body, buf)
}

// writeInTree is writeFile in an opened tree.
func writeInTree(t *Tree, w writeSpec, body io.Reader, buf []byte) (agentproto.FileWriteResult, error) {
	dir, base := path.Split(w.rel)
	pd, err := t.resolve(path.Clean(dir), true, true, true)
	if err != nil {
		return agentproto.FileWriteResult{}, fileErr("write", w.display, err)
	}
	defer pd.close()
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := ".genesis-upload-" + hex.EncodeToString(rnd[:])
	tl := loc{t: t, dir: pd.dir, name: tmp}
	f, err := tl.open(os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return agentproto.FileWriteResult{}, fileErr("write", w.display, err)
	}
	committed := false
	defer func() {
		if !committed {
			f.Close()
			unlinkat(pd.dir, tmp, 0)
		}
	}()
	h := sha256.New()
	src := body
	if w.maxBytes >= 0 {
		src = io.LimitReader(body, w.maxBytes+1)
	}
	n, err := copyHashed(f, h, src, buf, w.display)
	if err != nil {
		return agentproto.FileWriteResult{}, err
	}
	if w.maxBytes >= 0 && n > w.maxBytes {
		return agentproto.FileWriteResult{}, errTooLarge(w.display, w.maxBytes)
	}
	// fchmod on the open file: exactly the mode asked for, umask aside.
	if err := f.Chmod(w.mode); err != nil {
		return agentproto.FileWriteResult{}, fileErr("chmod", w.display, err)
	}
	if err := f.Close(); err != nil {
		return agentproto.FileWriteResult{}, fileErr("write", w.display, err)
	}
	if w.overwrite {
		err = syscall.Renameat(pd.dir, tmp, pd.dir, base)
	} else {
		err = linkat(pd.dir, tmp, pd.dir, base)
	}
	if err != nil {
		if fi, lerr := (&loc{t: t, dir: pd.dir, name: base}).lstat(); lerr == nil && fi.IsDir() {
			err = syscall.EISDIR
		}
		return agentproto.FileWriteResult{}, fileErr("write", w.display, err)
	}
	committed = true
	if !w.overwrite {
		unlinkat(pd.dir, tmp, 0)
	}
	return agentproto.FileWriteResult{
		Path:   agentproto.JoinRoot(w.root, w.rel),
		Size:   n,
		SHA256: hex.EncodeToString(h.Sum(nil)),
		Mode:   agentproto.FormatMode(w.mode),
	}, nil
}

// bodyError marks a failure to read the request body (the sender went away
// or sent too much), as opposed to a failure to write the file.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "reading the request body: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// copyHashed copies src to f and h until EOF and returns the byte count.
// It fills buf before each write: a request body arrives in HTTP/2 frames of
// 16 KiB, and a system call per frame is dear under gVisor.
func copyHashed(f *os.File, h io.Writer, src io.Reader, buf []byte, display string) (int64, error) {
	var n int64
	for {
		m, rerr := fill(src, buf)
		if m > 0 {
			if _, err := f.Write(buf[:m]); err != nil {
				return n, fileErr("write", display, err)
			}
			h.Write(buf[:m])
			n += int64(m)
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, &bodyError{rerr}
		}
	}
}

// fill reads into buf until it is full or r fails; unlike io.ReadFull it
// keeps io.EOF (the one clean end) apart from every other error, such as
// the io.ErrUnexpectedEOF of a body cut short.
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// transferBuffer is the buffer size for a transfer of size bytes (< 0:
// unknown): big enough to keep system calls few, no bigger than the file.
func transferBuffer(size int64) []byte {
	const max, min = 1 << 20, 4 << 10
	if size < 0 || size > max {
		return make([]byte, max)
	}
	return make([]byte, int(size)+min)
}

// bulkWriter hands http.ServeContent's copy a ReadFrom that moves up to
// len(buf) bytes per Write: every Write to an HTTP/2 response is a hand-off
// to the connection's writer goroutine, dear under gVisor, and ServeContent
// would otherwise write 32 KiB at a time.
type bulkWriter struct {
	http.ResponseWriter
	buf []byte
}

func (b *bulkWriter) ReadFrom(r io.Reader) (int64, error) {
	var n int64
	for {
		m, rerr := fill(r, b.buf)
		if m > 0 {
			if _, err := b.ResponseWriter.Write(b.buf[:m]); err != nil {
				return n, err
			}
			n += int64(m)
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

// openRegular opens rel for reading, refusing anything but a regular file:
// the walked object is checked before it is opened (so FIFOs and devices are
// never opened) and the opened descriptor after (authoritative); O_NONBLOCK
// keeps a FIFO swapped in between from blocking the open.
func openRegular(t *Tree, rel, display string) (*os.File, fs.FileInfo, error) {
	f, err := t.openFollow(rel, syscall.O_RDONLY|syscall.O_NONBLOCK, func(m fs.FileMode) error {
		if !m.IsRegular() {
			return notRegular("read", display, m)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fileErr("read", display, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, fileErr("read", display, err)
	}
	return f, fi, nil
}

// listDir lists rel down to depth levels (1: its entries), at most limit
// entries, depth first and sorted by name within each directory. Symlinks
// are listed, never descended; every directory is entered through the
// descriptor of the object that was stat'ed.
func listDir(t *Tree, rel, display string, depth, limit int) (agentproto.FileList, error) {
	out := agentproto.FileList{Path: agentproto.JoinRoot(t.root, rel), Entries: []agentproto.FileInfo{}}
	l, err := t.resolve(rel, true, false, false)
	if err != nil {
		return out, fileErr("list", display, err)
	}
	defer l.close()
	if !l.known {
		return out, fileErr("list", display, syscall.ENOENT)
	}
	if l.st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return out, errdefs.WithCode(agentproto.CodeNotADirectory, fmt.Errorf("list %q: not a directory: %w", display, errdefs.ErrConflict))
	}
	var walk func(dir int, relDir string, level int) error
	walk = func(dir int, relDir string, level int) error {
		rd, err := openat(dir, ".", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return fileErr("list", agentproto.JoinRoot(t.root, relDir), err)
		}
		f := os.NewFile(uintptr(rd), relDir)
		// One more name than still fits tells whether the limit cut it.
		names, err := f.Readdirnames(limit - len(out.Entries) + 1)
		f.Close()
		if err != nil && err != io.EOF {
			return fileErr("list", agentproto.JoinRoot(t.root, relDir), err)
		}
		slices.Sort(names)
		for _, name := range names {
			if len(out.Entries) >= limit {
				out.Truncated = true
				return nil
			}
			el := loc{t: t, dir: dir, name: name}
			fi, err := el.lstat()
			if err != nil {
				continue // gone since it was listed
			}
			link := ""
			if fi.Mode()&fs.ModeSymlink != 0 {
				link, _ = el.readlink()
			}
			childRel := path.Join(relDir, name)
			out.Entries = append(out.Entries, fileInfo(t.root, childRel, fi, link))
			if !fi.IsDir() || level >= depth {
				continue
			}
			sub, err := openat(dir, name, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
			if err != nil {
				continue
			}
			var st syscall.Stat_t
			if syscall.Fstat(sub, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
				err = walk(sub, childRel, level+1)
			}
			syscall.Close(sub)
			if err != nil {
				return err
			}
			if out.Truncated {
				return nil
			}
		}
		return nil
	}
	if err := walk(l.dir, rel, 1); err != nil {
		return out, err
	}
	return out, nil
}

// mkdirPath makes rel (with its parents unless parents is false) and sets
// mode on it when setMode (the umask aside).
func mkdirPath(t *Tree, rel, display string, mode fs.FileMode, parents, setMode bool) (agentproto.FileInfo, error) {
	if parents {
		l, err := t.resolve(rel, true, true, true)
		if err != nil {
			return agentproto.FileInfo{}, fileErr("mkdir", display, err)
		}
		l.close()
	} else {
		if rel == "." {
			return agentproto.FileInfo{}, fileErr("mkdir", display, syscall.EEXIST)
		}
		dir, base := path.Split(rel)
		pd, err := t.resolve(path.Clean(dir), true, true, false)
		if err != nil {
			return agentproto.FileInfo{}, fileErr("mkdir", display, err)
		}
		err = syscall.Mkdirat(pd.dir, base, uint32(mode.Perm()))
		pd.close()
		if err != nil {
			return agentproto.FileInfo{}, fileErr("mkdir", display, err)
		}
	}
	if setMode {
		if _, err := t.chmod(rel, mode); err != nil {
			return agentproto.FileInfo{}, fileErr("mkdir", display, err)
		}
	}
	l, err := t.resolve(rel, true, true, false)
	if err != nil {
		return agentproto.FileInfo{}, fileErr("mkdir", display, err)
	}
	defer l.close()
	return statLoc(&l, rel, display)
}

// movePath renames from to to (both in t). Without overwrite an existing
// destination is a conflict; the check is not atomic with the rename, it
// guards against clobbering by mistake and confinement does not depend on
// it.
func movePath(t *Tree, from, to, fromDisplay, toDisplay string, overwrite bool) (agentproto.FileInfo, error) {
	src, err := t.resolve(from, false, false, false)
	if err != nil {
		return agentproto.FileInfo{}, fileErr("move", fromDisplay, err)
	}
	defer src.close()
	if _, err := src.lstat(); err != nil {
		return agentproto.FileInfo{}, fileErr("move", fromDisplay, err)
	}
	dst, err := t.resolve(to, false, false, false)
	if err != nil {
		return agentproto.FileInfo{}, fileErr("move to", toDisplay, err)
	}
	defer dst.close()
	if !overwrite {
		if _, err := dst.lstat(); err == nil {
			return agentproto.FileInfo{}, errdefs.WithCode(agentproto.CodeFileExists, fmt.Errorf(
				"move to %q: exists (set overwrite to replace it): %w", toDisplay, errdefs.ErrConflict))
		} else if !errors.Is(err, syscall.ENOENT) {
			return agentproto.FileInfo{}, fileErr("move to", toDisplay, err)
		}
	}
	if err := syscall.Renameat(src.dir, src.name, dst.dir, dst.name); err != nil {
		return agentproto.FileInfo{}, fileErr("move", fromDisplay, err)
	}
	return statLoc(&dst, to, toDisplay)
}

// deletePath removes rel: a file, a symlink (not its target) or an empty
// directory; with recursive a whole tree, never following symlinks.
func deletePath(t *Tree, rel, display string, recursive bool) error {
	if rel == "." {
		return rootItself("delete", display)
	}
	l, err := t.resolve(rel, false, false, false)
	if err != nil {
		return fileErr("delete", display, err)
	}
	defer l.close()
	fi, err := l.lstat()
	if err != nil {
		return fileErr("delete", display, err)
	}
	switch {
	case recursive:
		err = removeAll(l.dir, l.name)
	case fi.IsDir():
		err = unlinkat(l.dir, l.name, atRemoveDir)
		if err == syscall.EEXIST {
			err = syscall.ENOTEMPTY
		}
	default:
		err = unlinkat(l.dir, l.name, 0)
	}
	return fileErr("delete", display, err)
}
