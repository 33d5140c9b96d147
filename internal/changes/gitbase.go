package changes

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"genesis.dev/sandbox/internal/errdefs"
)

// BaseGit is the base of the workspace's git repository: its HEAD commit,
// with untracked files that .gitignore ignores left out (git status's
// view).
const BaseGit = "git"

// CodeNotGitRepository: base git for a workspace whose root holds no git
// repository (.git directory).
const CodeNotGitRepository = "not_a_git_repository"

// CodeGitTooLarge: a .git directory over MaxGitBytes.
const CodeGitTooLarge = "git_too_large"

// gitRepo is a workspace's .git directory and ignore files, in memory.
type gitRepo struct {
	dotGit billy.Filesystem // the .git directory's files
	work   billy.Filesystem // the work tree's .gitignore files and .git/info/exclude
	found  bool
	size   int64
}

// readTreeAndGit reads a workspace tar like readTree, and keeps its .git
// directory (at the root; at most max bytes) and ignore files.
func readTreeAndGit(ctx context.Context, r io.Reader, k *keeper, max int64) (Tree, *gitRepo, error) {
	g := &gitRepo{dotGit: memfs.New(), work: memfs.New()}
	tee := &gitTee{g: g, max: max}
	t, err := readTreeWith(ctx, r, k, tee.entry)
	if err != nil {
		return nil, nil, err
	}
	if tee.err != nil {
		return nil, nil, tee.err
	}
	return t, g, nil
}

// gitTee takes the entries of a workspace tar that a git base needs.
type gitTee struct {
	g   *gitRepo
	max int64
	err error
}

// entry keeps h (whose content r is) when it is of the root's .git or an
// ignore file; having read r, it returns a reader of what it read.
func (gt *gitTee) entry(name string, h *tar.Header, r io.Reader) io.Reader {
	if gt.err != nil {
		return nil
	}
	rel, inGit := strings.CutPrefix(name, ".git/")
	if name == ".git" && h.Typeflag == tar.TypeDir {
		gt.g.found = true
		return nil
	}
	isIgnore := path.Base(name) == ".gitignore" || name == ".git/info/exclude"
	if !inGit && !isIgnore {
		return nil
	}
	if h.Typeflag != tar.TypeReg {
		if inGit && h.Typeflag == tar.TypeDir {
			gt.err = mkdirAll(gt.g.dotGit, rel)
		}
		return nil
	}
	if gt.g.size += h.Size; gt.g.size > gt.max {
		gt.err = errdefs.WithCode(CodeGitTooLarge, errdefs.Mark(fmt.Errorf(
			"the workspace's .git directory is over %d bytes, the limit of a diff against git", gt.max), errdefs.ErrTooLarge))
		return nil
	}
	data, err := io.ReadAll(r)
	if err != nil {
		gt.err = errdefs.Mark(fmt.Errorf("reading %s of the workspace: %v", name, err), errdefs.ErrUnavailable)
		return bytes.NewReader(nil)
	}
	if inGit {
		gt.err = writeMem(gt.g.dotGit, rel, data)
	}
	if isIgnore && gt.err == nil {
		gt.err = writeMem(gt.g.work, name, data)
	}
	return bytes.NewReader(data)
}

func mkdirAll(fsys billy.Filesystem, p string) error {
	if err := fsys.MkdirAll(p, 0o755); err != nil {
		return errdefs.Mark(fmt.Errorf("keeping %s: %v", p, err), errdefs.ErrInternal)
	}
	return nil
}

func writeMem(fsys billy.Filesystem, p string, data []byte) error {
	if err := mkdirAll(fsys, path.Dir(p)); err != nil {
		return err
	}
	f, err := fsys.Create(p)
	if err == nil {
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return errdefs.Mark(fmt.Errorf("keeping %s: %v", p, err), errdefs.ErrInternal)
	}
	return nil
}

// maxLinkBytes bounds a symbolic link's target read from git: no path a
// workspace holds is longer.
const maxLinkBytes = 4 << 10

// headTree is the tree of g's HEAD commit as a Tree (an empty one for a
// repository without commits). Submodules are left out. Every entry has
// its git blob id; a blob is inflated only when its lines may be shown:
// at most MaxTextBytes (a link's at most maxLinkBytes), within k's
// MaxKeptBytes and not equal to cur's file at its path. What is inflated
// is bounded by MaxGitBytes: the commit and trees (git_too_large past it),
// and the blobs read (past it a blob is left unread, too_large).
func (g *gitRepo) headTree(ctx context.Context, k *keeper, cur Tree) (Tree, error) {
	if !g.found {
		return nil, errdefs.WithCode(CodeNotGitRepository, errdefs.Mark(fmt.Errorf(
			"the workspace (%s) holds no git repository (a .git directory at its root); diff against creation, a snapshot or a sandbox", Root), errdefs.ErrFailedPrecondition))
	}
	// Objects elsewhere are none of the workspace's, and go-git reads
	// them without the options below.
	_ = g.dotGit.Remove("objects/info/alternates")
	objs, err := newGitObjects(g.dotGit)
	if err != nil {
		return nil, gitUnreadable(err)
	}
	defer objs.close()
	// Objects over the text limit are read as streams, never whole.
	st := filesystem.NewStorageWithOptions(g.dotGit, cache.NewObjectLRUDefault(),
		filesystem.Options{LargeObjectThreshold: k.lim.MaxTextBytes})
	defer st.Close()
	ref, err := storer.ResolveReference(st, plumbing.HEAD)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return Tree{}, nil // no commit yet: every file is new
	}
	if err != nil {
		return nil, gitUnreadable(err)
	}
	w := &headWalk{st: st, objs: objs, k: k, cur: cur, t: Tree{}}
	if err := w.inflate(ref.Hash()); err != nil {
		return nil, err
	}
	commit, err := object.GetCommit(st, ref.Hash())
	if err != nil {
		return nil, gitUnreadable(err)
	}
	if err := w.tree(ctx, commit.TreeHash, ""); err != nil {
		if _, ok := errors.AsType[errdefs.Coded](err); ok || ctx.Err() != nil {
			return nil, err
		}
		return nil, gitUnreadable(err)
	}
	return w.t, nil
}

// headWalk reads a commit's trees into a Tree.
type headWalk struct {
	st       *filesystem.Storage
	objs     *gitObjects
	k        *keeper
	cur      Tree
	t        Tree
	n        int   // entries seen, directories too
	inflated int64 // bytes go-git may have inflated
}

// inflate counts what reading commit or tree h inflates against
// MaxGitBytes before it is read.
func (w *headWalk) inflate(h plumbing.Hash) error {
	c, err := w.objs.check(h)
	if err != nil {
		return gitUnreadable(err)
	}
	if w.inflated += c.cost; w.inflated > w.k.lim.MaxGitBytes {
		return errdefs.WithCode(CodeGitTooLarge, errdefs.Mark(fmt.Errorf(
			"HEAD's commit and trees are over %d bytes, the limit of a diff against git", w.k.lim.MaxGitBytes), errdefs.ErrTooLarge))
	}
	return nil
}

// tree adds the files under tree h (at dir) to w.t.
func (w *headWalk) tree(ctx context.Context, h plumbing.Hash, dir string) error {
	if err := w.inflate(h); err != nil {
		return err
	}
	tree, err := object.GetTree(w.st, h)
	if err != nil {
		return err
	}
	for _, te := range tree.Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if w.n++; w.n > w.k.lim.MaxTreeEntries {
			return errdefs.WithCode(CodeTreeTooLarge, errdefs.Mark(fmt.Errorf(
				"HEAD holds more than %d entries, over the diff's limit", w.k.lim.MaxTreeEntries), errdefs.ErrTooLarge))
		}
		name := te.Name
		if dir != "" {
			name = dir + "/" + te.Name
		}
		if strings.Contains(te.Name, "/") || !localName(name) {
			continue
		}
		e := &Entry{blob: te.Hash}
		switch te.Mode {
		case filemode.Dir:
			if err := w.tree(ctx, te.Hash, name); err != nil {
				return err
			}
			continue
		case filemode.Regular, filemode.Deprecated:
			e.Mode = 0o644
		case filemode.Executable:
			e.Mode = 0o755
		case filemode.Symlink:
			e.Mode = fs.ModeSymlink | 0o777
		default:
			continue // submodules
		}
		if err := w.blob(name, e); err != nil {
			return err
		}
		if err := w.k.name(name); err != nil {
			return err
		}
		w.t[name] = e
	}
	return nil
}

// blob fills e's size and, where its lines may be shown, its content.
func (w *headWalk) blob(name string, e *Entry) error {
	size, err := w.objs.size(e.blob)
	if err != nil {
		return err
	}
	e.Size = size
	if c, ok := w.cur[name]; ok && c.blob == e.blob {
		return nil // equal to the workspace's: its lines are never needed
	}
	max := w.k.lim.MaxTextBytes
	if e.Mode&fs.ModeSymlink != 0 {
		max = min(max, maxLinkBytes)
	}
	if size > max || w.k.kept+size > w.k.lim.MaxKeptBytes {
		return nil // not inflated: compared by blob id, listed too_large
	}
	c, err := w.objs.check(e.blob)
	if err != nil {
		return err
	}
	if w.inflated+c.cost > w.k.lim.MaxGitBytes {
		return nil // its delta bases are over what is left to inflate
	}
	w.inflated += c.cost
	b, err := object.GetBlob(w.st, e.blob)
	if err != nil {
		return err
	}
	rd, err := b.Reader()
	if err != nil {
		return err
	}
	defer rd.Close()
	return w.k.read(name, e, io.LimitReader(rd, size))
}

// dropIgnored removes from cur the files HEAD does not track that the
// work tree's ignore files ignore, as git status leaves them out.
func (g *gitRepo) dropIgnored(cur, head Tree) {
	ps, err := gitignore.ReadPatterns(g.work, nil)
	if err != nil || len(ps) == 0 {
		return
	}
	m := gitignore.NewMatcher(ps)
	for p := range cur {
		if _, tracked := head[p]; tracked {
			continue
		}
		parts := strings.Split(p, "/")
		ignored := m.Match(parts, false)
		for i := 1; i < len(parts) && !ignored; i++ {
			ignored = m.Match(parts[:i], true) // a file in an ignored directory
		}
		if ignored {
			delete(cur, p)
		}
	}
}

func gitUnreadable(err error) error {
	return errdefs.WithCode("git_unreadable", errdefs.Mark(fmt.Errorf(
		"the workspace's git repository cannot be read: %v", err), errdefs.ErrFailedPrecondition))
}
