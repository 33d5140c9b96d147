package changes

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/errdefs"
)

// tarOf writes files (a value starting with "->" is a symbolic link to the
// rest; a name ending in * is executable) as a workspace tar.
func tarOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for name, data := range files {
		mode := int64(0o644)
		if n, ok := strings.CutSuffix(name, "*"); ok {
			name, mode = n, 0o755
		}
		h := &tar.Header{Name: name, Mode: mode, Typeflag: tar.TypeReg, Size: int64(len(data))}
		if target, ok := strings.CutPrefix(data, "->"); ok {
			h = &tar.Header{Name: name, Mode: 0o777, Typeflag: tar.TypeSymlink, Linkname: target}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func treeOf(t *testing.T, files map[string]string) Tree {
	t.Helper()
	tr, err := ReadTree(context.Background(), bytes.NewReader(tarOf(t, files)), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

var (
	baseFiles = map[string]string{
		"README.md":     "hello\nworld\n",
		"src/main.py":   "import os\n\ndef main():\n    print('one')\n    print('two')\n\nmain()\n",
		"old.txt":       "going away\n",
		"run.sh":        "#!/bin/sh\necho hi\n",
		"data.bin":      "\x00\x01\x02binary",
		".git/HEAD":     "ref: refs/heads/main\n",
		"nested/.git/x": "ignored",
		"noeol.txt":     "no newline",
		"same.txt":      "unchanged\n",
		"link":          "->README.md",
	}
	curFiles = map[string]string{
		"README.md":    "hello\nthere\nworld\n",
		"src/main.py":  "import os\n\ndef main():\n    print('one')\n    print('2')\n\nmain()\n",
		"new/file.txt": "brand new\n",
		"run.sh*":      "#!/bin/sh\necho hi\n",
		"data.bin":     "\x00\x01\x03binary",
		".git/HEAD":    "ref: refs/heads/other\n",
		"noeol.txt":    "no newline at all",
		"same.txt":     "unchanged\n",
		"link":         "->src/main.py",
	}
)

func TestDiffListsChanges(t *testing.T) {
	t.Parallel()
	res := Diff(treeOf(t, baseFiles), treeOf(t, curFiles), Limits{})
	want := map[string]Status{
		"README.md": Modified, "src/main.py": Modified, "old.txt": Deleted, "new/file.txt": Added,
		"run.sh": ModeChanged, "data.bin": Modified, "noeol.txt": Modified, "link": Modified,
	}
	got := map[string]FileChange{}
	for _, f := range res.Files {
		got[f.Path] = f
	}
	if len(got) != len(want) {
		t.Fatalf("files %v, want %v", res.Files, want)
	}
	for p, st := range want {
		if got[p].Status != st {
			t.Errorf("%s: status %q, want %q", p, got[p].Status, st)
		}
	}
	if f := got["data.bin"]; !f.Binary || strings.Contains(f.Diff, "binary") || !strings.Contains(f.Diff, "Binary files a/data.bin and b/data.bin differ") {
		t.Errorf("binary file: %+v", f)
	}
	if f := got["README.md"]; f.Additions != 1 || f.Deletions != 0 || !strings.Contains(f.Diff, "+there\n") {
		t.Errorf("README.md: %+v", f)
	}
	if f := got["run.sh"]; f.OldMode != "0644" || f.NewMode != "0755" || !strings.Contains(f.Diff, "old mode 100644\nnew mode 100755\n") {
		t.Errorf("run.sh: %+v", f)
	}
	if s := res.Summary; s.Files != 8 || s.Added != 1 || s.Deleted != 1 || s.ModeChanged != 1 || s.Modified != 5 || res.Truncated {
		t.Errorf("summary %+v truncated %v", s, res.Truncated)
	}
}

// TestDiffRoundTrip applies the diff of two trees to the first with the
// package's own Apply and with git apply: both give the second (binary
// files left out: a diff names them only).
func TestDiffRoundTrip(t *testing.T) {
	t.Parallel()
	base, cur := map[string]string{}, map[string]string{}
	for k, v := range baseFiles {
		if k != "data.bin" && k != "link" && !strings.Contains(k, ".git") {
			base[k] = v
		}
	}
	for k, v := range curFiles {
		if k != "data.bin" && k != "link" && !strings.Contains(k, ".git") {
			cur[k] = v
		}
	}
	res := Diff(treeOf(t, base), treeOf(t, cur), Limits{})
	text := res.Patch()
	p, err := ParsePatch([]byte(text), Limits{})
	if err != nil {
		t.Fatalf("parse own diff: %v\n%s", err, text)
	}
	state := map[string]Current{}
	for _, r := range p.Reads() {
		v, ok := base[r]
		mode := fs.FileMode(0o644)
		if _, x := base[r+"*"]; x {
			v, ok, mode = base[r+"*"], true, 0o755
		}
		state[r] = Current{Exists: ok, Data: []byte(v), Mode: mode}
	}
	ops, err := Apply(p, state)
	if err != nil {
		t.Fatalf("apply own diff: %v\n%s", err, text)
	}
	after := map[string]string{}
	for k, v := range base {
		after[k] = v
	}
	for _, op := range ops {
		if op.Delete {
			delete(after, op.Path)
			continue
		}
		if op.Mode&0o111 != 0 {
			delete(after, op.Path)
			after[op.Path+"*"] = string(op.Data)
			continue
		}
		after[op.Path] = string(op.Data)
	}
	if len(after) != len(cur) {
		t.Fatalf("after the patch %q, want %q", after, cur)
	}
	for k, v := range cur {
		if after[k] != v {
			t.Errorf("%s after the patch: %q, want %q", k, after[k], v)
		}
	}

	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Log("no git: the git apply half is not checked")
		return
	}
	dir := t.TempDir()
	for k, v := range base {
		mode := os.FileMode(0o644)
		if n, ok := strings.CutSuffix(k, "*"); ok {
			k, mode = n, 0o755
		}
		os.MkdirAll(filepath.Join(dir, filepath.Dir(k)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v), mode); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(gitBin, "apply", "-")
	cmd.Dir, cmd.Stdin = dir, strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v: %s\n%s", err, out, text)
	}
	for k, v := range cur {
		k = strings.TrimSuffix(k, "*")
		b, err := os.ReadFile(filepath.Join(dir, k))
		if err != nil || string(b) != v {
			t.Errorf("%s after git apply: %q %v, want %q", k, b, err, v)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "old.txt")); !os.IsNotExist(err) {
		t.Errorf("old.txt after git apply: %v, want removed", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "run.sh")); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("run.sh after git apply: %v %v, want executable", fi.Mode(), err)
	}
}

func TestDiffLimits(t *testing.T) {
	t.Parallel()
	base, cur := map[string]string{}, map[string]string{}
	for _, n := range []string{"a", "b", "c", "d"} {
		base[n] = "x\n"
		cur[n] = strings.Repeat("y\n", 100)
	}
	res := Diff(treeOf(t, base), treeOf(t, cur), Limits{MaxDiffFiles: 3})
	if len(res.Files) != 3 || !res.Truncated || res.Summary.Files != 4 || !strings.Contains(res.TruncatedReason, "3 changed files") {
		t.Errorf("file limit: %d files, %+v, %q", len(res.Files), res.Summary, res.TruncatedReason)
	}
	res = Diff(treeOf(t, base), treeOf(t, cur), Limits{MaxDiffBytes: 500})
	if len(res.Files) != 4 || !res.Truncated || res.Files[0].Diff == "" || res.Files[3].Diff != "" {
		t.Errorf("byte limit: %+v", res)
	}
	if !strings.HasPrefix(res.Patch(), "# genesis: this diff is truncated") {
		t.Errorf("a truncated patch does not say so: %q", res.Patch()[:40])
	}
	big := map[string]string{"big": strings.Repeat("z\n", 1000)}
	res = Diff(treeOf(t, map[string]string{"big": "z\n"}), treeOf(t, big), Limits{MaxTextBytes: 100})
	if len(res.Files) != 1 || !res.Files[0].TooLarge || strings.Contains(res.Files[0].Diff, "+z") {
		t.Errorf("too large: %+v", res.Files)
	}
	_, err := ReadTree(context.Background(), bytes.NewReader(tarOf(t, base)), Limits{MaxTreeEntries: 2})
	if errdefs.Code(err) != CodeTreeTooLarge {
		t.Errorf("tree over its limit: %v", err)
	}
}

// TestReadTreeBoundsLinksAndNames: link targets count against
// MaxKeptBytes as file contents do (those past it are compared by
// checksum, too_large), and a tree whose paths are over it is refused.
func TestReadTreeBoundsLinksAndNames(t *testing.T) {
	t.Parallel()
	target := "->" + strings.Repeat("t", 4000)
	links := map[string]string{}
	for i := range 100 {
		links[fmt.Sprintf("l/%03d", i)] = target
	}
	lim := Limits{MaxKeptBytes: 100_000}
	tr, err := ReadTree(context.Background(), bytes.NewReader(tarOf(t, links)), lim)
	if err != nil {
		t.Fatal(err)
	}
	kept, over := 0, 0
	for _, e := range tr {
		kept += len(e.Data)
		if !e.Kept {
			over++
		}
	}
	if kept > 100_000 || over == 0 || len(tr) != 100 {
		t.Errorf("%d entries, %d bytes of link targets kept, %d not kept; want at most 100000 kept", len(tr), kept, over)
	}
	res := Diff(Tree{}, tr, lim)
	tooLarge := 0
	for _, f := range res.Files {
		if f.TooLarge {
			tooLarge++
		}
	}
	if res.Summary.Added != 100 || tooLarge != over {
		t.Errorf("links past the limit: %d added, %d too_large, want %d", res.Summary.Added, tooLarge, over)
	}

	names := map[string]string{}
	for i := range 1000 {
		names[fmt.Sprintf("%03d-%s", i, strings.Repeat("n", 200))] = ""
	}
	_, err = ReadTree(context.Background(), bytes.NewReader(tarOf(t, names)), lim)
	if errdefs.Code(err) != CodeTreeTooLarge || errdefs.HTTPStatus(err) != 413 {
		t.Errorf("paths over MaxKeptBytes: %v", err)
	}
}

func parseOK(t *testing.T, text string) *Patch {
	t.Helper()
	p, err := ParsePatch([]byte(text), Limits{})
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return p
}

// TestApplyConflictChangesNothing: a patch whose second file's hunk does
// not apply returns no Op at all (the first file, which would apply, is
// not written either) and names the file and hunk.
func TestApplyConflictChangesNothing(t *testing.T) {
	t.Parallel()
	text := "--- a/one.txt\n+++ b/one.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n" +
		"--- a/two.txt\n+++ b/two.txt\n@@ -1,2 +1,2 @@\n x\n-y\n+Y\n@@ -5,2 +5,2 @@\n p\n-q\n+Q\n"
	p := parseOK(t, text)
	cur := map[string]Current{
		"one.txt": {Exists: true, Data: []byte("a\nb\n"), Mode: 0o644},
		"two.txt": {Exists: true, Data: []byte("x\ny\n3\n4\np\nchanged since\n"), Mode: 0o644},
	}
	ops, err := Apply(p, cur)
	if err == nil || ops != nil {
		t.Fatalf("apply: ops %v err %v, want a conflict and no op", ops, err)
	}
	if errdefs.Code(err) != CodePatchConflict || errdefs.HTTPStatus(err) != 409 ||
		!strings.Contains(err.Error(), "two.txt: hunk 2 (@@ -5,2 +5,2 @@)") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Errorf("conflict: %v (code %s)", err, errdefs.Code(err))
	}
}

func TestApplyCreatesDeletesRenames(t *testing.T) {
	t.Parallel()
	text := "diff --git a/new.txt b/new.txt\nnew file mode 100755\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+made\n" +
		"diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n" +
		"diff --git a/from.txt b/dir/to.txt\nsimilarity index 90%\nrename from from.txt\nrename to dir/to.txt\n--- a/from.txt\n+++ b/dir/to.txt\n@@ -1 +1 @@\n-v1\n+v2\n"
	p := parseOK(t, text)
	cur := map[string]Current{
		"gone.txt": {Exists: true, Data: []byte("bye\n"), Mode: 0o644},
		"from.txt": {Exists: true, Data: []byte("v1\n"), Mode: 0o600},
	}
	ops, err := Apply(p, cur)
	if err != nil {
		t.Fatal(err)
	}
	want := []Op{{Path: "new.txt", Data: []byte("made\n"), Mode: 0o755}, {Path: "gone.txt", Delete: true},
		{Path: "dir/to.txt", Data: []byte("v2\n"), Mode: 0o600}, {Path: "from.txt", Delete: true}}
	if len(ops) != len(want) {
		t.Fatalf("ops %+v, want %+v", ops, want)
	}
	for i := range want {
		if ops[i].Path != want[i].Path || ops[i].Delete != want[i].Delete || string(ops[i].Data) != string(want[i].Data) || ops[i].Mode != want[i].Mode {
			t.Errorf("op %d: %+v, want %+v", i, ops[i], want[i])
		}
	}
	// A file to create that exists, one to change that is missing.
	if _, err := Apply(parseOK(t, text), map[string]Current{"new.txt": {Exists: true}, "gone.txt": cur["gone.txt"], "from.txt": cur["from.txt"]}); errdefs.Code(err) != CodePatchConflict {
		t.Errorf("create over an existing file: %v", err)
	}
	if _, err := Apply(parseOK(t, text), map[string]Current{"from.txt": cur["from.txt"]}); errdefs.Code(err) != CodePatchConflict || !strings.Contains(err.Error(), "gone.txt") {
		t.Errorf("delete of a missing file: %v", err)
	}
}

func TestParsePatchRefuses(t *testing.T) {
	t.Parallel()
	hunk := "@@ -1 +1 @@\n-a\n+b\n"
	tests := []struct {
		name, text, code string
	}{
		{"dot-dot", "--- a/../etc/passwd\n+++ b/../etc/passwd\n" + hunk, "path_outside_root"},
		{"absolute", "--- /etc/passwd\n+++ /etc/passwd\n" + hunk, "path_outside_root"},
		{"dot-dot inside", "--- a/x/../../y\n+++ b/x/../../y\n" + hunk, "path_outside_root"},
		{"git dir", "--- a/.git/config\n+++ b/.git/config\n" + hunk, "path_outside_root"},
		{"git rename out", "diff --git a/x b/../x\nrename from x\nrename to ../x\n", "path_outside_root"},
		{"binary", "diff --git a/x.bin b/x.bin\nindex 1234567..89abcde 100644\nGIT binary patch\nliteral 3\nKcmZQzWMT\n\nliteral 0\nKcmV+b0RR6000031\n\n", CodePatchInvalid},
		{"binary no data", "diff --git a/x.bin b/x.bin\nindex 1234567..89abcde 100644\nBinary files a/x.bin and b/x.bin differ\n", CodePatchInvalid},
		{"symlink", "diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n", CodePatchInvalid},
		{"not a patch", "hello, world\n", CodePatchInvalid},
		{"malformed hunk", "--- a/x\n+++ b/x\n@@ -1,5 +1,5 @@\n-a\n+b\n", CodePatchInvalid},
		{"twice", "--- a/x\n+++ b/x\n" + hunk + "--- a/x\n+++ b/x\n" + hunk, CodePatchInvalid},
		{"too large", "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+" + strings.Repeat("b", 10<<20) + "\n", CodePatchTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParsePatch([]byte(tc.text), Limits{})
			if errdefs.Code(err) != tc.code {
				t.Fatalf("error %v (code %q), want code %q", err, errdefs.Code(err), tc.code)
			}
			if s := errdefs.HTTPStatus(err); s < 400 || s >= 500 {
				t.Errorf("status %d, want a 4xx", s)
			}
		})
	}
}

func FuzzParsePatch(f *testing.F) {
	f.Add([]byte("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"))
	f.Add([]byte("diff --git a/x b/y\nrename from x\nrename to y\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		p, err := ParsePatch(text, Limits{})
		if err != nil {
			return
		}
		for _, r := range p.Reads() {
			if !localName(r) {
				t.Fatalf("parsed patch names %q", r)
			}
		}
		Apply(p, map[string]Current{})
	})
}

// TestPatchNamesModeGitCannotExpress: a mode change git cannot express
// (0644 → 0600) is listed without patch text, and the patch form names it
// in a leading comment instead of leaving it out silently; the patch still
// parses and applies the rest.
func TestPatchNamesModeGitCannotExpress(t *testing.T) {
	t.Parallel()
	treeWith := func(secretMode int64, notes string) Tree {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, f := range []struct {
			name, data string
			mode       int64
		}{{"notes.txt", notes, 0o644}, {"secret.txt", "key\n", secretMode}} {
			if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Typeflag: tar.TypeReg, Size: int64(len(f.data))}); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write([]byte(f.data)); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		tr, err := ReadTree(context.Background(), &b, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	res := Diff(treeWith(0o644, "a\n"), treeWith(0o600, "a\nb\n"), Limits{})
	if len(res.Files) != 2 || res.Files[1].Status != ModeChanged || res.Files[1].Diff != "" {
		t.Fatalf("files %+v, want notes.txt modified and secret.txt mode_changed without text", res.Files)
	}
	patch := res.Patch()
	want := "# genesis: secret.txt: mode 0644 → 0600, which git cannot express"
	if !strings.HasPrefix(patch, want) || !strings.Contains(patch, "+b\n") {
		t.Fatalf("patch %q, want it to start with %q and hold the text change", patch, want)
	}
	p, err := ParsePatch([]byte(patch), Limits{})
	if err != nil {
		t.Fatalf("the patch with its comment does not parse: %v", err)
	}
	if len(p.Files) != 1 {
		t.Errorf("parsed %d file changes, want 1 (notes.txt)", len(p.Files))
	}
	if git, err := exec.LookPath("git"); err == nil {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("a\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(git, "apply", "--check", "-")
		cmd.Dir, cmd.Stdin = dir, strings.NewReader(patch)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("git apply --check: %v: %s", err, out)
		}
	}
}

// TestReadTreeHardLinks: a snapshot's tar stores another name of a file as
// a hard link; the tree has the file under each name, so a workspace that
// still holds both names is no change against it.
func TestReadTreeHardLinks(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range []*tar.Header{
		{Name: "a", Typeflag: tar.TypeReg, Mode: 0o644, Size: 2},
		{Name: "b", Typeflag: tar.TypeLink, Linkname: "a"},
		{Name: "c", Typeflag: tar.TypeLink, Linkname: "nowhere"},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte("x\n")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	snap, err := ReadTree(context.Background(), &buf, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if b := snap["b"]; b == nil || string(b.Data) != "x\n" || b.Sum != snap["a"].Sum || snap["c"] != nil {
		t.Fatalf("tree %v: want b as a's second name and no c", snap)
	}
	live, err := ReadTree(context.Background(), bytes.NewReader(tarOf(t, map[string]string{"a": "x\n", "b": "x\n"})), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if res := Diff(snap, live, Limits{}); len(res.Files) != 0 {
		t.Errorf("a workspace with both names against the snapshot: %+v, want no change", res.Files)
	}
}
