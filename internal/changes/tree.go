package changes

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"genesis.dev/sandbox/internal/errdefs"
)

// Limits bound what a diff reads and shows and what a patch may hold.
type Limits struct {
	// MaxTreeEntries bounds the files, links and directories of one tree
	// read for a diff.
	MaxTreeEntries int
	// MaxTextBytes is the largest file whose lines are compared; a larger
	// changed file is listed with too_large and no hunks.
	MaxTextBytes int64
	// MaxKeptBytes bounds the file contents and link targets held in
	// memory for one tree read for a diff; files and links past it are
	// compared by checksum only (too_large). The paths of one tree are
	// bounded by it too: past it the tree is refused
	// (workspace_too_large).
	MaxKeptBytes int64
	// MaxDiffFiles bounds the files listed by a diff; MaxDiffBytes the
	// bytes of its unified diff. Past either the diff says truncated.
	MaxDiffFiles int
	MaxDiffBytes int
	// MaxPatchBytes bounds a patch's text; MaxPatchFiles the files it
	// names.
	MaxPatchBytes int64
	MaxPatchFiles int
	// MaxGitBytes bounds the .git directory read for a diff against git,
	// and, apart, the bytes inflated from it: HEAD's commit, its trees and
	// the blobs whose lines are shown, with their delta bases.
	MaxGitBytes int64
	// MaxPatchReadBytes bounds the current contents of all the files one
	// patch reads.
	MaxPatchReadBytes int64
}

// DefaultLimits are the limits of a Service whose Config names none.
var DefaultLimits = Limits{
	MaxTreeEntries: 200_000,
	MaxTextBytes:   1 << 20,
	MaxKeptBytes:   256 << 20,
	MaxDiffFiles:   1000,
	MaxDiffBytes:   8 << 20,
	MaxPatchBytes:  8 << 20,
	MaxPatchFiles:  1000,
	MaxGitBytes:    256 << 20,

	MaxPatchReadBytes: 64 << 20,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxTreeEntries > 0 {
		d.MaxTreeEntries = l.MaxTreeEntries
	}
	if l.MaxTextBytes > 0 {
		d.MaxTextBytes = l.MaxTextBytes
	}
	if l.MaxKeptBytes > 0 {
		d.MaxKeptBytes = l.MaxKeptBytes
	}
	if l.MaxDiffFiles > 0 {
		d.MaxDiffFiles = l.MaxDiffFiles
	}
	if l.MaxDiffBytes > 0 {
		d.MaxDiffBytes = l.MaxDiffBytes
	}
	if l.MaxPatchBytes > 0 {
		d.MaxPatchBytes = l.MaxPatchBytes
	}
	if l.MaxPatchFiles > 0 {
		d.MaxPatchFiles = l.MaxPatchFiles
	}
	if l.MaxGitBytes > 0 {
		d.MaxGitBytes = l.MaxGitBytes
	}
	if l.MaxPatchReadBytes > 0 {
		d.MaxPatchReadBytes = l.MaxPatchReadBytes
	}
	return d
}

// Problem codes of this package.
const (
	// CodePatchConflict: a hunk does not apply to the file as it is, or a
	// file to create exists, or one to change is missing.
	CodePatchConflict = "patch_conflict"
	// CodePatchInvalid: the text is not a patch this service applies
	// (malformed, empty, a binary or symbolic-link change, a copy).
	CodePatchInvalid = "patch_invalid"
	// CodePatchTooLarge: a patch over MaxPatchBytes or MaxPatchFiles, or
	// whose files are over MaxTextBytes each or MaxPatchReadBytes
	// together.
	CodePatchTooLarge = "patch_too_large"
	// CodeTreeTooLarge: a tree over MaxTreeEntries.
	CodeTreeTooLarge = "workspace_too_large"
	// CodeInvalidBase: a base that names nothing this service diffs
	// against.
	CodeInvalidBase = "invalid_base"
)

// Entry is one file or symbolic link of a tree (directories are not kept:
// git tracks none).
type Entry struct {
	// Mode is the file's mode with its type bits (fs.ModeSymlink for a
	// link).
	Mode fs.FileMode
	Size int64
	Sum  [sha256.Size]byte
	// Data is the content (a link's target) when it was kept: at most
	// MaxTextBytes, and while the tree's kept bytes stay under
	// MaxKeptBytes.
	Data []byte
	Kept bool
	// blob is the content's git blob id, set for a diff against git
	// (both sides), which compares by it.
	blob plumbing.Hash
}

// Tree is a workspace's files by slash-separated path relative to its
// root.
type Tree map[string]*Entry

// ignored reports whether p is in a .git directory: a repository's
// database is not part of the changes a diff shows (git shows none), and a
// patch may not write it.
func ignored(p string) bool {
	for _, c := range strings.Split(p, "/") {
		if c == ".git" {
			return true
		}
	}
	return false
}

// keeper decides which contents a tree read keeps in memory.
type keeper struct {
	lim  Limits
	kept int64
	// names counts the bytes of the paths kept, bounded by MaxKeptBytes
	// apart from the contents.
	names int64
	// gitIDs, when set, has each entry's git blob id computed as it is
	// read.
	gitIDs bool
	// skip, when set, names contents not to keep: files equal to the
	// other side's need no lines.
	skip func(p string, sum [sha256.Size]byte) bool
}

// ReadTree reads a tar of a workspace (relative names, as the agent and
// snapshots write them) into a Tree: regular files and symbolic links;
// directories, other kinds and anything under .git are left out. Names
// that are not local paths are refused (a tar of ours never has them).
func ReadTree(ctx context.Context, r io.Reader, lim Limits) (Tree, error) {
	return readTree(ctx, r, &keeper{lim: lim.withDefaults()})
}

func readTree(ctx context.Context, r io.Reader, k *keeper) (Tree, error) {
	return readTreeWith(ctx, r, k, nil)
}

// entryHook sees each entry of a workspace tar (name cleaned) before it is
// kept or skipped; when it reads the content it returns a reader of it
// for the tree.
type entryHook func(name string, h *tar.Header, r io.Reader) io.Reader

func readTreeWith(ctx context.Context, r io.Reader, k *keeper, hook entryHook) (Tree, error) {
	t := Tree{}
	tr := tar.NewReader(r)
	n := 0
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			// The rest is the archive's padding; reading it lets a
			// checking reader see its end.
			if _, err := io.Copy(io.Discard, io.LimitReader(r, 1<<20)); err != nil {
				return nil, fmt.Errorf("reading the workspace: %w", err)
			}
			return t, nil
		}
		if err != nil {
			if _, ok := errors.AsType[errdefs.Coded](err); ok {
				return nil, err // a damaged snapshot, a sandbox gone
			}
			return nil, errdefs.Mark(fmt.Errorf("reading the workspace: %v", err), errdefs.ErrUnavailable)
		}
		if n++; n > k.lim.MaxTreeEntries {
			return nil, errdefs.WithCode(CodeTreeTooLarge, errdefs.Mark(fmt.Errorf(
				"the workspace holds more than %d entries, over the diff's limit", k.lim.MaxTreeEntries), errdefs.ErrTooLarge))
		}
		name := strings.TrimPrefix(strings.TrimSuffix(h.Name, "/"), "./")
		if name == "" || name == "." {
			continue
		}
		if !fs.ValidPath(name) {
			return nil, errdefs.Mark(fmt.Errorf("reading the workspace: entry %q is not a local path", h.Name), errdefs.ErrInternal)
		}
		var content io.Reader = tr
		if hook != nil {
			if rd := hook(name, h, tr); rd != nil {
				content = rd
			}
		}
		if ignored(name) {
			continue
		}
		var e *Entry
		switch h.Typeflag {
		case tar.TypeReg:
			e = &Entry{Mode: fs.FileMode(h.Mode).Perm(), Size: h.Size}
			if err := k.read(name, e, content); err != nil {
				return nil, err
			}
		case tar.TypeSymlink:
			e = &Entry{Mode: fs.ModeSymlink | 0o777, Size: int64(len(h.Linkname))}
			if err := k.read(name, e, strings.NewReader(h.Linkname)); err != nil {
				return nil, err
			}
		case tar.TypeLink: // a snapshot's hard link: another name of a file read before
			target, ok := t[strings.TrimPrefix(path.Clean(h.Linkname), "./")]
			if !ok || !target.Mode.IsRegular() {
				continue
			}
			c := *target
			e = &c
		default:
			continue
		}
		if err := k.name(name); err != nil {
			return nil, err
		}
		t[name] = e
	}
}

// name counts the bytes of a path a tree keeps.
func (k *keeper) name(p string) error {
	if k.names += int64(len(p)); k.names > k.lim.MaxKeptBytes {
		return errdefs.WithCode(CodeTreeTooLarge, errdefs.Mark(fmt.Errorf(
			"the workspace's paths are over %d bytes together, over the diff's limit", k.lim.MaxKeptBytes), errdefs.ErrTooLarge))
	}
	return nil
}

// read fills e's checksum (and git blob id, for a diff against git) from
// r, keeping the content (a file's or a link's target) where the limits
// allow it.
func (k *keeper) read(name string, e *Entry, r io.Reader) error {
	h := sha256.New()
	var w io.Writer = h
	var gh plumbing.Hasher
	if k.gitIDs {
		gh = plumbing.NewHasher(plumbing.BlobObject, e.Size)
		w = io.MultiWriter(h, gh)
	}
	done := func() {
		copy(e.Sum[:], h.Sum(nil))
		if k.gitIDs {
			e.blob = gh.Sum()
		}
	}
	keep := e.Size <= k.lim.MaxTextBytes && k.kept+e.Size <= k.lim.MaxKeptBytes
	if !keep {
		if _, err := io.Copy(w, r); err != nil {
			return errdefs.Mark(fmt.Errorf("reading %s of the workspace: %v", name, err), errdefs.ErrUnavailable)
		}
		done()
		return nil
	}
	var buf bytes.Buffer
	buf.Grow(int(e.Size))
	if _, err := io.Copy(io.MultiWriter(&buf, w), io.LimitReader(r, e.Size)); err != nil {
		return errdefs.Mark(fmt.Errorf("reading %s of the workspace: %v", name, err), errdefs.ErrUnavailable)
	}
	done()
	if k.skip != nil && k.skip(name, e.Sum) {
		return nil // equal to the other side: its lines are never needed
	}
	e.Data, e.Kept = buf.Bytes(), true
	k.kept += e.Size
	return nil
}

// localName reports whether p is a path a patch may name: relative,
// slash-separated, clean, not empty and not under .git.
func localName(p string) bool {
	return p != "" && fs.ValidPath(p) && p != "." && path.Clean(p) == p && !ignored(p)
}
