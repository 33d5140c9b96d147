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
// times (nanoseconds); other kinds (sockets, FIFOs, devices) are skipped,
// and hard links are stored as separate files.

// errCorrupt is a snapshot file whose content is not what its manifest
// says.
func errCorrupt(name, why string) error {
	return errdefs.WithCode("snapshot_corrupt", errdefs.Mark(fmt.Errorf("snapshot file %s is damaged (%s); the snapshot cannot be restored", name, why), errdefs.ErrFailedPrecondition))
}

// WriteTree writes the tree under dir to w as a tar and returns its size
// and SHA-256.
func WriteTree(ctx context.Context, dir string, w io.Writer) (int64, string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return 0, "", fmt.Errorf("snapshots: open workspace %s: %v: %w", dir, err, errdefs.ErrUnavailable)
	}
	defer root.Close()
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(w, h)}
	tw := tar.NewWriter(cw)
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
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
		}
		switch {
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
		if ctx.Err() != nil {
			return 0, "", ctx.Err()
		}
		return 0, "", fmt.Errorf("snapshots: copy workspace %s: %v: %w", dir, err, errdefs.ErrUnavailable)
	}
	return cw.n, hex.EncodeToString(h.Sum(nil)), nil
}

// ReadTree extracts a tar written by WriteTree into dir (which exists),
// checking that its SHA-256 is wantSHA. On any error what was extracted
// stays in dir; the caller discards the directory.
func ReadTree(ctx context.Context, r io.Reader, dir, name, wantSHA string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("snapshots: open workspace %s: %v: %w", dir, err, errdefs.ErrUnavailable)
	}
	defer root.Close()
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
			return errCorrupt(name, err.Error())
		}
		p := path.Clean(hdr.Name)
		if !fs.ValidPath(p) || p == "." {
			return errCorrupt(name, fmt.Sprintf("entry %q", hdr.Name))
		}
		mode := fs.FileMode(hdr.Mode).Perm() | fs.FileMode(hdr.Mode)&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("snapshots: restore %s: %v: %w", p, err, errdefs.ErrUnavailable)
			}
			dirs = append(dirs, dirTime{p, hdr.ModTime})
		case tar.TypeReg:
			f, err := root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return fmt.Errorf("snapshots: restore %s: %v: %w", p, err, errdefs.ErrUnavailable)
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("snapshots: restore %s: %v: %w", p, err, errdefs.ErrUnavailable)
			}
		case tar.TypeSymlink:
			if err := root.Symlink(hdr.Linkname, p); err != nil {
				return fmt.Errorf("snapshots: restore %s: %v: %w", p, err, errdefs.ErrUnavailable)
			}
			if err := root.Lchown(p, hdr.Uid, hdr.Gid); err != nil {
				return fmt.Errorf("snapshots: restore %s: %v: %w", p, err, errdefs.ErrUnavailable)
			}
			continue
		default:
			continue
		}
		if err := root.Lchown(p, hdr.Uid, hdr.Gid); err != nil {
			return fmt.Errorf("snapshots: restore %s: %v: %w", p, err, errdefs.ErrUnavailable)
		}
		if err := root.Chmod(p, mode); err != nil {
			return fmt.Errorf("snapshots: restore %s: %v: %w", p, err, errdefs.ErrUnavailable)
		}
		if hdr.Typeflag == tar.TypeReg {
			if err := root.Chtimes(p, hdr.ModTime, hdr.ModTime); err != nil {
				return fmt.Errorf("snapshots: restore %s: %v: %w", p, err, errdefs.ErrUnavailable)
			}
		}
	}
	if _, err := io.Copy(io.Discard, r); err != nil { // the tar's padding counts too
		return errCorrupt(name, err.Error())
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != wantSHA {
		return errCorrupt(name, "checksum mismatch")
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = root.Chtimes(dirs[i].name, dirs[i].t, dirs[i].t)
	}
	return nil
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
