package snapshots

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
)

// A workspace travels as a tar: written by walking the sandbox's workspace
// directory on the host, read back into another sandbox's. The directory
// belongs to the sandbox, so both ends go through os.Root: no symbolic
// link is ever followed, and nothing is read or written outside the
// directory, whatever the sandbox made there. Regular files, directories
// and symbolic links keep their contents, modes, owners and modification
// times (nanoseconds); other kinds (sockets, FIFOs, devices) are skipped.
// A file with several hard links is stored once, its other names as
// links to the first (tar's TypeLink), and restored as links again: a
// snapshot never holds more than the files' contents. A sparse file is
// stored at its full length, and counts so against TreeLimits.

// errCorrupt is a snapshot file whose content is not what its manifest
// says.
func errCorrupt(name, why string) error {
	return errdefs.WithCode("snapshot_corrupt", errdefs.Mark(fmt.Errorf("snapshot file %s is damaged (%s); the snapshot cannot be restored", name, why), errdefs.ErrFailedPrecondition))
}

// CodeTooLarge is the problem code of a snapshot over its size limits.
const CodeTooLarge = "snapshot_too_large"

// TreeLimits bound a tree WriteTree writes (0: no bound).
type TreeLimits struct {
	// MaxContent bounds the files' contents: each file once however many
	// hard links it has, a sparse file at its full length. A sandbox's
	// workspace holds at most its disk size of them.
	MaxContent int64
	// MaxBytes bounds the tar.
	MaxBytes int64
}

// errTooLarge is a snapshot refused for its size.
func errTooLarge(format string, a ...any) error {
	return errdefs.WithCode(CodeTooLarge, errdefs.Mark(fmt.Errorf(format, a...), errdefs.ErrTooLarge))
}

// WriteTree writes the tree under dir to w as a tar and returns its size
// and SHA-256. Past a limit of lim it stops with a snapshot_too_large
// error (413), having written at most lim.MaxBytes (and a tar block) to w;
// the caller discards what was written.
func WriteTree(ctx context.Context, dir string, w io.Writer, lim TreeLimits) (int64, string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, "", fmt.Errorf("snapshots: open the workspace: %v: %w", errnoOf(err), errdefs.ErrUnavailable)
	}
	defer root.Close()
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(w, h), max: lim.MaxBytes}
	tw := tar.NewWriter(cw)
	type inode struct{ dev, ino uint64 }
	linked := map[inode]string{} // a file with several links → its first name
	var content int64
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if p == "." {
			return nil
		}
		info, err := root.Lstat(p)
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return nil // a kind tar cannot hold
		}
		hdr.Name, hdr.Format = p, tar.FormatPAX
		hdr.Uname, hdr.Gname = "", ""
		st, _ := info.Sys().(*syscall.Stat_t)
		if st != nil {
			hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
		}
		switch {
		case info.Mode().IsRegular() && st != nil && st.Nlink > 1:
			id := inode{uint64(st.Dev), st.Ino}
			if first, ok := linked[id]; ok {
				hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
				return tw.WriteHeader(hdr)
			}
			linked[id] = p
		case info.Mode().IsRegular():
		case info.IsDir():
			hdr.Name += "/"
		case info.Mode()&fs.ModeSymlink != 0:
			if hdr.Linkname, err = root.Readlink(p); err != nil {
				return err
			}
		default:
			return nil // sockets, FIFOs and devices are not kept
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		if content += info.Size(); lim.MaxContent > 0 && content > lim.MaxContent {
			return errTooLarge("the workspace's files hold more than %d bytes, the sandbox's disk size (a sparse file counts at its full length, %.200q at %d bytes): nothing was kept",
				lim.MaxContent, p, info.Size())
		}
		f, err := root.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if n, err := io.Copy(tw, io.LimitReader(f, info.Size())); err != nil {
			return err
		} else if n != info.Size() {
			return fmt.Errorf("%s shrank while it was copied (%d of %d bytes)", p, n, info.Size())
		}
		return nil
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return 0, "", ctx.Err()
		case errors.Is(err, errOverMax):
			return 0, "", errdefs.WithCode(CodeTooLarge, errdefs.Mark(errdefs.Mark(fmt.Errorf(
				"the snapshot's workspace takes more than %d bytes, its limit: nothing was kept", lim.MaxBytes), errOverMax), errdefs.ErrTooLarge))
		case errdefs.Code(err) != "":
			return 0, "", err
		}
		// os.Root's errors name paths inside the workspace; w's may name
		// the host's: the errno says enough.
		return 0, "", fmt.Errorf("snapshots: copy the workspace: %v: %w", errnoOf(err), errdefs.ErrUnavailable)
	}
	return cw.n, hex.EncodeToString(h.Sum(nil)), nil
}

// errnoOf is the system's errno under err (its text names no path), or
// err without the path of its *fs.PathError, or err.
func errnoOf(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// restoreError is the error of restoring entry p: its name in the
// workspace and the errno, never a host path. A full workspace is 413
// no_space.
func restoreError(p string, err error) error {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return fmt.Errorf("snapshots: restore %s: %v: %w", p, errnoOf(err), errdefs.ErrUnavailable)
	}
	switch errno {
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG:
		return errdefs.WithCode("no_space", errdefs.Mark(fmt.Errorf(
			"the snapshot's workspace does not fit in the sandbox's disk (restoring %s: %v): give the sandbox a larger disk_mb", p, errno), errdefs.ErrTooLarge))
	}
	return fmt.Errorf("snapshots: restore %s: %v: %w", p, errno, errdefs.ErrUnavailable)
}

// ReadTree extracts a tar written by WriteTree into dir (which exists),
// checking that its SHA-256 is wantSHA. On any error what was extracted
// stays in dir; the caller discards the directory.
func ReadTree(ctx context.Context, r io.Reader, dir, name, wantSHA string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("snapshots: open the workspace: %v: %w", errnoOf(err), errdefs.ErrUnavailable)
	}
	defer root.Close()
	written := map[string]bool{} // the regular files extracted: what a hard link may name
	h := sha256.New()
	tr := tar.NewReader(io.TeeReader(r, h))
	type dirTime struct {
		name string
		t    time.Time
	}
	var dirs []dirTime // directory times are set last: their entries change them
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return errCorrupt(name, errnoOf(err).Error())
		}
		p := path.Clean(hdr.Name)
		if !fs.ValidPath(p) || p == "." {
			return errCorrupt(name, fmt.Sprintf("entry %q", hdr.Name))
		}
		// Permission bits, and a directory's sticky bit (tar's 01000);
		// never setuid or setgid: the files are the sandbox's, restored
		// by the host.
		mode := fs.FileMode(hdr.Mode).Perm()
		if hdr.Typeflag == tar.TypeDir && hdr.Mode&0o1000 != 0 {
			mode |= fs.ModeSticky
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return restoreError(p, err)
			}
			dirs = append(dirs, dirTime{p, hdr.ModTime})
		case tar.TypeReg:
			f, err := root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return restoreError(p, err)
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return restoreError(p, err)
			}
			written[p] = true
		case tar.TypeLink:
			// Another name of a file this tar holds before it: never of
			// anything else (the workspace's own files, the host's).
			target := path.Clean(hdr.Linkname)
			if !written[target] {
				return errCorrupt(name, fmt.Sprintf("entry %q links to %q, not a file before it", hdr.Name, hdr.Linkname))
			}
			if err := root.Link(target, p); err != nil {
				return restoreError(p, err)
			}
			continue // the linked file has its owner, mode and times
		case tar.TypeSymlink:
			if err := root.Symlink(hdr.Linkname, p); err != nil {
				return restoreError(p, err)
			}
			if err := root.Lchown(p, hdr.Uid, hdr.Gid); err != nil {
				return restoreError(p, err)
			}
			continue
		default:
			continue
		}
		if err := root.Lchown(p, hdr.Uid, hdr.Gid); err != nil {
			return restoreError(p, err)
		}
		if err := root.Chmod(p, mode); err != nil {
			return restoreError(p, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if err := root.Chtimes(p, hdr.ModTime, hdr.ModTime); err != nil {
				return restoreError(p, err)
			}
		}
	}
	if _, err := io.Copy(io.Discard, r); err != nil { // the tar's padding counts too
		return errCorrupt(name, errnoOf(err).Error())
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != wantSHA {
		return errCorrupt(name, "checksum mismatch")
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = root.Chtimes(dirs[i].name, dirs[i].t, dirs[i].t)
	}
	return nil
}

// countWriter counts the bytes written through it, and refuses those past
// max (0: no bound).
type countWriter struct {
	w   io.Writer
	n   int64
	max int64
}

// errOverMax is a countWriter's refusal, and the mark of WriteTree's
// error past TreeLimits.MaxBytes.
var errOverMax = errors.New("over the limit")

func (c *countWriter) Write(p []byte) (int, error) {
	if c.max > 0 && c.n+int64(len(p)) > c.max {
		return 0, errOverMax
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
