package changes

import (
	"archive/tar"
	"bytes"
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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

	k := &keeper{lim: DefaultLimits}
	cur, repo, err := readTreeAndGit(context.Background(), bytes.NewReader(tarDir(t, dir)), k, DefaultLimits.MaxGitBytes)
	if err != nil {
		t.Fatal(err)
	}
	head, err := repo.headTree(context.Background(), &keeper{lim: DefaultLimits})
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
	if _, err := repo.headTree(context.Background(), &keeper{lim: DefaultLimits}); errdefs.Code(err) != CodeNotGitRepository || errdefs.HTTPStatus(err) != 409 {
		t.Errorf("no repository: %v", err)
	}
	// A .git directory over the limit.
	if _, _, err := readTreeAndGit(context.Background(), bytes.NewReader(tarDir(t, dir)), &keeper{lim: DefaultLimits}, 100); errdefs.Code(err) != CodeGitTooLarge {
		t.Errorf(".git over its limit: %v", err)
	}
}
