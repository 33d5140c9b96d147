package changes

import (
	"archive/tar"
	"bytes"
	"compress/zlib"
	"context"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"

	"genesis.dev/sandbox/internal/errdefs"
)

// tarDir writes the tree under dir as the agent's archive does: relative
// names, directories with a trailing slash, links with their targets.
func tarDir(t *testing.T, dir string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			link, _ = os.Readlink(p)
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			h.Name += "/"
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			tw.Write(data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tw.Close()
	return b.Bytes()
}

func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
		"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// TestDiffAgainstGit: a repository committed (and packed) by real git, then
// edited; the diff against git lists what git status would — a modified,
// a deleted, an untracked and a mode-changed file — and leaves out
// ignored files and the repository itself; its patch, applied with git
// apply to a clean checkout, gives the edited files.
func TestDiffAgainstGit(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on this host to make the repository with")
	}
	dir := t.TempDir()
	w := func(p, data string, mode os.FileMode) {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(dir, p), mode)
	}
	w("main.go", "package main\n\nfunc main() {\n\tprintln(\"hi\")\n}\n", 0o644)
	w("lib/util.go", "package lib\n", 0o644)
	w("run.sh", "#!/bin/sh\n", 0o644)
	w("gone.txt", "bye\n", 0o644)
	w(".gitignore", "build/\n*.log\n", 0o644)
	os.Symlink("main.go", filepath.Join(dir, "link"))
	gitIn(t, dir, "init", "-q", "-b", "main")
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "-m", "first")
	gitIn(t, dir, "gc", "-q") // objects in a pack
	clean := t.TempDir()
	gitIn(t, clean, "clone", "-q", dir, ".")

	w("main.go", "package main\n\nfunc main() {\n\tprintln(\"hello\")\n}\n", 0o644)
	w("new/added.txt", "new\n", 0o644)
	w("build/out.o", "\x00obj", 0o644)
	w("debug.log", "noise\n", 0o644)
	os.Chmod(filepath.Join(dir, "run.sh"), 0o755)
	os.Remove(filepath.Join(dir, "gone.txt"))

	k := &keeper{lim: DefaultLimits, gitIDs: true}
	cur, repo, err := readTreeAndGit(context.Background(), bytes.NewReader(tarDir(t, dir)), k, DefaultLimits.MaxGitBytes)
	if err != nil {
		t.Fatal(err)
	}
	head, err := repo.headTree(context.Background(), &keeper{lim: DefaultLimits}, cur)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := head["link"]; !ok || len(head) != 6 {
		t.Fatalf("HEAD's tree: %v", slices.Sorted(func(y func(string) bool) {
			for p := range head {
				if !y(p) {
					return
				}
			}
		}))
	}
	repo.dropIgnored(cur, head)
	res := Diff(head, cur, Limits{})
	var got []string
	for _, f := range res.Files {
		got = append(got, f.Path+" "+string(f.Status))
	}
	want := []string{"gone.txt deleted", "main.go modified", "new/added.txt added", "run.sh mode_changed"}
	if !slices.Equal(got, want) {
		t.Fatalf("diff against git: %q, want %q", got, want)
	}
	cmd := exec.Command("git", "apply", "-")
	cmd.Dir, cmd.Stdin = clean, strings.NewReader(res.Patch())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v: %s\n%s", err, out, res.Patch())
	}
	if b, _ := os.ReadFile(filepath.Join(clean, "main.go")); !strings.Contains(string(b), "hello") {
		t.Errorf("main.go after git apply: %q", b)
	}

	// A workspace without a repository.
	plain := t.TempDir()
	os.WriteFile(filepath.Join(plain, "x"), []byte("x"), 0o644)
	_, repo, err = readTreeAndGit(context.Background(), bytes.NewReader(tarDir(t, plain)), &keeper{lim: DefaultLimits}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repo.headTree(context.Background(), &keeper{lim: DefaultLimits}, nil); errdefs.Code(err) != CodeNotGitRepository || errdefs.HTTPStatus(err) != 409 {
		t.Errorf("no repository: %v", err)
	}
	// A .git directory over the limit.
	if _, _, err := readTreeAndGit(context.Background(), bytes.NewReader(tarDir(t, dir)), &keeper{lim: DefaultLimits}, 100); errdefs.Code(err) != CodeGitTooLarge {
		t.Errorf(".git over its limit: %v", err)
	}
}

// writeBlob writes a loose blob of size bytes of b to the repository
// dotGit, streaming (a large one compresses to almost nothing).
func writeBlob(t *testing.T, dg *dotgit.DotGit, b byte, size int64) plumbing.Hash {
	t.Helper()
	w, err := dg.NewObject()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteHeader(plumbing.BlobObject, size); err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte{b}, 1<<20)
	for n := size; n > 0; n -= int64(len(chunk)) {
		if _, err := w.Write(chunk[:min(n, int64(len(chunk)))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Hash()
}

// largeObjectRepo makes, in dir, a repository whose HEAD holds blobs
// declared far larger than the .git that holds them: big.bin and
// same.bin (zeros, same.bin also in the work tree), a link whose target
// is 64 MiB and one of 8 KiB, and a small text file.
func largeObjectRepo(t *testing.T, dir string, big int64) {
	t.Helper()
	fsys := osfs.New(filepath.Join(dir, ".git"))
	st := filesystem.NewStorage(fsys, cache.NewObjectLRUDefault())
	if err := st.Init(); err != nil {
		t.Fatal(err)
	}
	dg := dotgit.New(fsys)
	tree := &object.Tree{Entries: []object.TreeEntry{
		{Name: "big.bin", Mode: filemode.Regular, Hash: writeBlob(t, dg, 0, big)},
		{Name: "biglink", Mode: filemode.Symlink, Hash: writeBlob(t, dg, 'a', big)},
		{Name: "longlink", Mode: filemode.Symlink, Hash: writeBlob(t, dg, 'a', 8<<10)},
		{Name: "same.bin", Mode: filemode.Regular, Hash: writeBlob(t, dg, 0, 1<<20)},
		{Name: "text.txt", Mode: filemode.Regular, Hash: writeBlob(t, dg, 'x', 3)},
	}}
	c := storeCommit(t, st, tree)
	if err := st.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, "refs/heads/main")); err != nil {
		t.Fatal(err)
	}
	if err := st.SetReference(plumbing.NewHashReference("refs/heads/main", c)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "same.bin"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), []byte("small now\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "text.txt"), []byte("xxy"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDiffAgainstGitLargeObjects: a small .git whose HEAD holds blobs
// declared large (compressing to almost nothing) is diffed without
// inflating them: large blobs are compared by git blob id and listed
// too_large, a link's blob over 4 KiB is never read, and the bytes
// allocated stay far below the blobs' size. Not parallel: it measures the
// process's allocations.
func TestDiffAgainstGitLargeObjects(t *testing.T) {
	const big = 64 << 20
	dir := t.TempDir()
	largeObjectRepo(t, dir, big)
	ws := tarDir(t, dir)
	lim := Limits{MaxTextBytes: 64 << 10}.withDefaults()

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cur, repo, err := readTreeAndGit(context.Background(), bytes.NewReader(ws), &keeper{lim: lim, gitIDs: true}, lim.MaxGitBytes)
	if err != nil {
		t.Fatal(err)
	}
	head, err := repo.headTree(context.Background(), &keeper{lim: lim}, cur)
	if err != nil {
		t.Fatal(err)
	}
	res := Diff(head, cur, lim)
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > big/8 {
		t.Errorf("the diff allocated %d bytes for blobs of %d", alloc, big)
	}

	show := func(f FileChange) string {
		return fmt.Sprintf("%s %s too_large=%v sizes %d→%d +%d -%d", f.Path, f.Status, f.TooLarge, f.OldSize, f.NewSize, f.Additions, f.Deletions)
	}
	got := map[string]FileChange{}
	for _, f := range res.Files {
		got[f.Path] = f
	}
	if len(got) != 4 {
		t.Errorf("%d changed files, want 4", len(got))
	}
	if f := got["big.bin"]; f.Status != Modified || !f.TooLarge || f.OldSize != big || f.NewSize != 10 {
		t.Errorf("big.bin: %s", show(f))
	}
	for _, p := range []string{"biglink", "longlink"} {
		if f := got[p]; f.Status != Deleted || !f.TooLarge || head[p].Kept {
			t.Errorf("%s: %s", p, show(f))
		}
	}
	if f := got["text.txt"]; f.Status != Modified || f.TooLarge || f.Additions != 1 {
		t.Errorf("text.txt: %s", show(f))
	}
	if _, listed := got["same.bin"]; listed || head["same.bin"].Kept {
		t.Errorf("same.bin (equal, over the text limit) was listed or read: %s", show(got["same.bin"]))
	}

	// The commit and trees inflated are bounded too.
	small := lim
	small.MaxGitBytes = 100
	if _, err := repo.headTree(context.Background(), &keeper{lim: small}, cur); errdefs.Code(err) != CodeGitTooLarge || errdefs.HTTPStatus(err) != 413 {
		t.Errorf("commit and trees over MaxGitBytes: %v", err)
	}
}

// zlibZeros writes prefix and n zero bytes to w as one zlib stream.
func zlibZeros(t *testing.T, w io.Writer, prefix []byte, n int64) {
	t.Helper()
	zw := zlib.NewWriter(w)
	zw.Write(prefix)
	if _, err := io.CopyN(zw, zeroReader{}, n); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// commitFiles makes a repository in dir (the .git's storage returned)
// whose HEAD's tree holds files: name → blob id (the blobs are the
// caller's to write).
func commitFiles(t *testing.T, dir string, files map[string]plumbing.Hash) *filesystem.Storage {
	t.Helper()
	st := filesystem.NewStorage(osfs.New(filepath.Join(dir, ".git")), cache.NewObjectLRUDefault())
	if err := st.Init(); err != nil {
		t.Fatal(err)
	}
	tree := &object.Tree{}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		tree.Entries = append(tree.Entries, object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: files[name]})
	}
	c := storeCommit(t, st, tree)
	if err := st.SetReference(plumbing.NewHashReference(plumbing.HEAD, c)); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestDiffAgainstGitDamagedObjects: objects whose headers lie about what
// they hold — a loose blob that declares 10 bytes and inflates to 64 MiB,
// a packed delta of a 10-byte blob whose instructions inflate to 32 MiB —
// are refused or left unread, never inflated in memory. Not parallel: it
// measures the process's allocations.
func TestDiffAgainstGitDamagedObjects(t *testing.T) {
	const big = 64 << 20
	fake := func(s string) plumbing.Hash { return plumbing.ComputeHash(plumbing.BlobObject, []byte(s)) }
	diff := func(dir string, lim Limits) (Tree, error) {
		t.Helper()
		ws := tarDir(t, dir)
		cur, repo, err := readTreeAndGit(context.Background(), bytes.NewReader(ws), &keeper{lim: lim, gitIDs: true}, lim.MaxGitBytes)
		if err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		head, err := repo.headTree(context.Background(), &keeper{lim: lim}, cur)
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
			t.Errorf("reading HEAD allocated %d bytes", alloc)
		}
		return head, err
	}

	// A loose blob whose header says 10 bytes.
	dir := t.TempDir()
	liar := fake("liar")
	commitFiles(t, dir, map[string]plumbing.Hash{"liar.txt": liar})
	p := filepath.Join(dir, ".git", "objects", liar.String()[:2], liar.String()[2:])
	os.MkdirAll(filepath.Dir(p), 0o755)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	zlibZeros(t, f, []byte("blob 10\x00"), big)
	f.Close()
	if _, err := diff(dir, DefaultLimits); errdefs.Code(err) != "git_unreadable" || errdefs.HTTPStatus(err) != 409 {
		t.Errorf("a loose object longer than its header: %v", err)
	}

	// A packed delta (of a loose base) whose instructions inflate to
	// 32 MiB: its size is read from its first bytes, and reading it is
	// over what is left to inflate.
	dir = t.TempDir()
	delta := fake("delta")
	st := commitFiles(t, dir, map[string]plumbing.Hash{"delta.txt": delta})
	base := st.NewEncodedObject()
	base.SetType(plumbing.BlobObject)
	w, _ := base.Writer()
	w.Write([]byte("base\n"))
	baseID, err := st.SetEncodedObject(base)
	if err != nil {
		t.Fatal(err)
	}
	var pack bytes.Buffer
	pack.Write([]byte("PACK\x00\x00\x00\x02\x00\x00\x00\x01"))
	const instr = 32 << 20
	n := int64(instr + 2) // the two sizes, then the instructions
	pack.WriteByte(0x80 | byte(plumbing.REFDeltaObject)<<4 | byte(n&0x0f))
	for n >>= 4; n > 0; n >>= 7 {
		c := byte(n & 0x7f)
		if n > 0x7f {
			c |= 0x80
		}
		pack.WriteByte(c)
	}
	pack.Write(baseID[:])
	zlibZeros(t, &pack, []byte{5, 10}, instr)
	sum := plumbing.ComputeHash(plumbing.BlobObject, pack.Bytes()) // any id: nothing checks it
	pack.Write(sum[:])
	iw := new(idxfile.Writer)
	iw.OnHeader(1)
	iw.OnInflatedObjectContent(delta, 12, 0, nil)
	iw.OnFooter(sum)
	idx, err := iw.Index()
	if err != nil {
		t.Fatal(err)
	}
	packDir := filepath.Join(dir, ".git", "objects", "pack")
	os.MkdirAll(packDir, 0o755)
	os.WriteFile(filepath.Join(packDir, "pack-"+sum.String()+".pack"), pack.Bytes(), 0o644)
	var ib bytes.Buffer
	if _, err := idxfile.NewEncoder(&ib).Encode(idx); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(packDir, "pack-"+sum.String()+".idx"), ib.Bytes(), 0o644)
	pack.Reset()
	lim := DefaultLimits
	lim.MaxGitBytes = 8 << 20
	head, err := diff(dir, lim)
	if err != nil {
		t.Fatal(err)
	}
	if e := head["delta.txt"]; e == nil || e.Size != 10 || e.Kept {
		t.Errorf("the delta: %+v", e)
	}
}

// storeCommit stores tree and a commit of it in st and returns the
// commit's hash.
func storeCommit(t *testing.T, st storer.EncodedObjectStorer, tree *object.Tree) plumbing.Hash {
	t.Helper()
	put := func(o object.Object) plumbing.Hash {
		obj := st.NewEncodedObject()
		if err := o.Encode(obj); err != nil {
			t.Fatal(err)
		}
		h, err := st.SetEncodedObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	sig := object.Signature{Name: "t", Email: "t@example.com"}
	return put(&object.Commit{Author: sig, Committer: sig, Message: "x\n", TreeHash: put(tree)})
}
