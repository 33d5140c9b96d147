package fsops

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// Archives: a tar (optionally gzip-compressed) extracted inside the sandbox,
// every entry written through the confined resolver, and a directory
// streamed out as a tar. Entries that would land or point outside the
// allowed root are refused: absolute names, names with .. that climb out
// (zip slip), symlinks whose target leaves the root from where the link
// really is, hard links to anything outside.

// archiveErr is the error of a refused archive entry.
func archiveErr(code string, class error, entry, format string, args ...any) error {
	return errdefs.WithCode(code, fmt.Errorf("archive entry %q: %s: %w", entry, fmt.Sprintf(format, args...), class))
}

// entryPath maps a tar entry name to a clean path local to the destination.
func entryPath(name string) (string, error) {
	n := strings.TrimSuffix(name, "/")
	switch {
	case n == "" || n == ".":
		return ".", nil
	case strings.IndexByte(n, 0) >= 0:
		return "", archiveErr(agentproto.CodeInvalidPath, errdefs.ErrInvalidArgument, name, "name contains a NUL byte")
	case path.IsAbs(n):
		return "", archiveErr(agentproto.CodePathOutsideRoot, errdefs.ErrInvalidArgument, name, "absolute name")
	case !filepath.IsLocal(n):
		return "", archiveErr(agentproto.CodePathOutsideRoot, errdefs.ErrInvalidArgument, name, "name leads outside the destination")
	}
	return path.Clean(n), nil
}

// extractSpec is one extraction.
type extractSpec struct {
	dest, display string // destination directory, relative to the root
	maxBytes      int64  // of file content, all entries together
	maxEntries    int
}

// extractTar reads a tar (gzip-compressed or not) from r into the
// destination, creating it. It stops at the first refused entry; entries
// before it stay extracted.
func extractTar(t *Tree, x extractSpec, r io.Reader) (agentproto.ExtractResult, error) {
	res := agentproto.ExtractResult{Path: agentproto.JoinRoot(t.root, x.dest)}
	dl, err := t.resolve(x.dest, true, true, true)
	if err != nil {
		return res, fileErr("extract into", x.display, err)
	}
	dl.close()
	br := bufio.NewReaderSize(r, 64<<10)
	var src io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return res, archiveBodyErr(err)
		}
		src = zr
	}
	tr := tar.NewReader(src)
	buf := make([]byte, 1<<20)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return res, nil
		}
		if err != nil {
			return res, archiveBodyErr(err)
		}
		if res.Entries++; res.Entries > x.maxEntries {
			return res, errdefs.WithCode(agentproto.CodeUploadTooLarge, fmt.Errorf(
				"archive has more than %d entries: %w", x.maxEntries, errdefs.ErrTooLarge))
		}
		name, err := entryPath(h.Name)
		if err != nil {
			return res, err
		}
		rel := path.Join(x.dest, name)
		mode := fs.FileMode(h.Mode) & fs.ModePerm
		switch h.Typeflag {
		case tar.TypeDir:
			l, err := t.resolve(rel, true, true, true)
			if err != nil {
				return res, fileErr("extract", h.Name, err)
			}
			l.close()
			if _, err := t.chmod(rel, mode|0o700); err != nil { // the owner keeps access to extract into it
				return res, fileErr("extract", h.Name, err)
			}
			res.Dirs++
		case tar.TypeReg: // the reader reports the old '\x00' type as TypeReg
			if rel == x.dest {
				return res, archiveErr(agentproto.CodeIsADirectory, errdefs.ErrConflict, h.Name, "a file in place of the destination")
			}
			left := x.maxBytes - res.Bytes
			if h.Size > left {
				return res, errdefs.WithCode(agentproto.CodeUploadTooLarge, fmt.Errorf(
					"archive content is over the %d-byte limit at entry %q: %w", x.maxBytes, h.Name, errdefs.ErrTooLarge))
			}
			w, err := writeInTree(t, writeSpec{root: t.root, rel: rel, display: h.Name, mode: mode, overwrite: true, maxBytes: h.Size}, tr, buf)
			if err != nil {
				var be *bodyError
				if errors.As(err, &be) {
					return res, archiveBodyErr(be.err)
				}
				return res, err
			}
			if w.Size != h.Size {
				return res, archiveErr("invalid_archive", errdefs.ErrInvalidArgument, h.Name, "%d bytes of content, header says %d", w.Size, h.Size)
			}
			res.Files++
			res.Bytes += w.Size
		case tar.TypeSymlink:
			if err := extractSymlink(t, rel, h); err != nil {
				return res, err
			}
			res.Symlinks++
		case tar.TypeLink:
			target, err := entryPath(h.Linkname)
			if err != nil {
				return res, archiveErr(agentproto.CodePathOutsideRoot, errdefs.ErrInvalidArgument, h.Name, "hard link to %q outside the destination", h.Linkname)
			}
			if err := extractHardlink(t, path.Join(x.dest, target), rel, h.Name); err != nil {
				return res, err
			}
			res.Hardlinks++
		default: // devices, FIFOs, extended headers the reader did not fold in
			res.Skipped++
		}
	}
}

// archiveBodyErr classifies a failure to read the archive.
func archiveBodyErr(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errdefs.WithCode(agentproto.CodeUploadTooLarge, fmt.Errorf("archive: %v: %w", err, errdefs.ErrTooLarge))
	}
	return errdefs.WithCode("invalid_archive", errdefs.Invalid("archive is not a readable tar or tar.gz: %v", err))
}

// extractSymlink makes the symlink of entry h at rel, replacing a file or
// symlink there. Its target must be relative and stay inside the root when
// resolved from the directory the link really lands in.
func extractSymlink(t *Tree, rel string, h *tar.Header) error {
	target := h.Linkname
	if target == "" || strings.IndexByte(target, 0) >= 0 || path.IsAbs(target) {
		return archiveErr(agentproto.CodePathOutsideRoot, errdefs.ErrInvalidArgument, h.Name, "symlink to %q: only relative targets inside the root are allowed", target)
	}
	dir, base := path.Split(rel)
	pd, err := t.resolve(path.Clean(dir), true, true, true)
	if err != nil {
		return fileErr("extract", h.Name, err)
	}
	defer pd.close()
	if !filepath.IsLocal(path.Join(pd.canon, target)) {
		return archiveErr(agentproto.CodePathOutsideRoot, errdefs.ErrInvalidArgument, h.Name, "symlink to %q leads outside the root", target)
	}
	if err := replaceable(&pd, base, h.Name); err != nil {
		return err
	}
	if err := symlinkat(target, pd.dir, base); err != nil {
		return fileErr("extract", h.Name, err)
	}
	// The lexical check cannot see a symlink already in the root that the
	// target passes through; resolving the new link can.
	l, err := t.resolve(rel, true, false, false)
	if err == nil {
		l.close()
	} else if errors.Is(err, errEscape) || errors.Is(err, syscall.ELOOP) {
		unlinkat(pd.dir, base, 0)
		return archiveErr(agentproto.CodePathOutsideRoot, errdefs.ErrInvalidArgument, h.Name, "symlink to %q leads outside the root", target)
	}
	return nil
}

// extractHardlink links newRel to the existing oldRel (a link itself is
// linked, never followed).
func extractHardlink(t *Tree, oldRel, newRel, entry string) error {
	old, err := t.resolve(oldRel, false, false, false)
	if err != nil {
		return fileErr("extract", entry, err)
	}
	defer old.close()
	fi, err := old.lstat()
	if err != nil {
		return fileErr("extract", entry, err)
	}
	if fi.IsDir() {
		return archiveErr(agentproto.CodeIsADirectory, errdefs.ErrInvalidArgument, entry, "hard link to a directory")
	}
	dir, base := path.Split(newRel)
	pd, err := t.resolve(path.Clean(dir), true, true, true)
	if err != nil {
		return fileErr("extract", entry, err)
	}
	defer pd.close()
	if err := replaceable(&pd, base, entry); err != nil {
		return err
	}
	return fileErr("extract", entry, linkat(old.dir, old.name, pd.dir, base))
}

// replaceable removes a file or symlink at name in pd so an entry can take
// its place; a directory there is a conflict.
func replaceable(pd *loc, name, entry string) error {
	l := loc{t: pd.t, dir: pd.dir, name: name}
	fi, err := l.lstat()
	switch {
	case errors.Is(err, syscall.ENOENT):
		return nil
	case err != nil:
		return fileErr("extract", entry, err)
	case fi.IsDir():
		return archiveErr(agentproto.CodeIsADirectory, errdefs.ErrConflict, entry, "a directory is in the way")
	}
	return fileErr("extract", entry, unlinkat(pd.dir, name, 0))
}

// writeTar streams the tree below rel as a tar: directories, regular files
// and symlinks (as links, never followed), sorted by name; other files are
// left out. Names are relative to rel.
func writeTar(t *Tree, rel, display string, w io.Writer) error {
	l, err := t.resolve(rel, true, true, false)
	if err != nil {
		return fileErr("archive", display, err)
	}
	defer l.close()
	tw := tar.NewWriter(w)
	buf := make([]byte, 1<<20)
	var walk func(dir int, prefix string) error
	walk = func(dir int, prefix string) error {
		rd, err := openat(dir, ".", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return fileErr("archive", prefix, err)
		}
		f := os.NewFile(uintptr(rd), prefix)
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			return fileErr("archive", prefix, err)
		}
		slices.Sort(names)
		for _, name := range names {
			el := loc{t: t, dir: dir, name: name}
			fi, err := el.lstat()
			if err != nil {
				continue // gone since it was listed
			}
			link := ""
			switch {
			case fi.Mode()&fs.ModeSymlink != 0:
				if link, err = el.readlink(); err != nil {
					continue
				}
			case fi.IsDir(), fi.Mode().IsRegular():
			default:
				continue // devices, FIFOs, sockets
			}
			var src *os.File
			if fi.Mode().IsRegular() {
				// The header is made from the opened file, so a file
				// swapped or resized after the listing cannot desync it.
				if src, fi, err = openRegularAt(dir, name); err != nil {
					continue
				}
			}
			h, err := tar.FileInfoHeader(fi, link)
			if err != nil {
				if src != nil {
					src.Close()
				}
				return fmt.Errorf("archive %q: %v: %w", prefix+name, err, errdefs.ErrInternal)
			}
			h.Name = prefix + name
			h.Uname, h.Gname = "", ""
			if fi.IsDir() {
				h.Name += "/"
			}
			if err := tw.WriteHeader(h); err != nil {
				if src != nil {
					src.Close()
				}
				return err
			}
			if src != nil {
				_, err := io.CopyBuffer(tw, io.LimitReader(src, h.Size), buf)
				src.Close()
				if err != nil {
					return err
				}
				continue
			}
			if fi.IsDir() {
				sub, err := openat(dir, name, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
				if err != nil {
					continue
				}
				var st syscall.Stat_t
				if syscall.Fstat(sub, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
					err = walk(sub, h.Name)
				}
				syscall.Close(sub)
				if err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(l.dir, ""); err != nil {
		return err
	}
	return tw.Close()
}

// openRegularAt opens name in dir for reading if it is a regular file (not
// following a symlink; O_NONBLOCK so a FIFO swapped in cannot block, then
// cleared so the descriptor stays out of the poller).
func openRegularAt(dir int, name string) (*os.File, fs.FileInfo, error) {
	fd, err := openat(dir, name, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		return nil, nil, syscall.EINVAL
	}
	if err := syscall.SetNonblock(fd, false); err != nil {
		syscall.Close(fd)
		return nil, nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}
