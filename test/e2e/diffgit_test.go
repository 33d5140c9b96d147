package e2e

import (
	"archive/tar"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"genesis.dev/sandbox/client"
)

// TestDiffAgainstGitHead, under runc and runsc: a git checkout (made by
// git on the host; the images carry no git) is the workspace; an agent
// edits files; genesis diff --base git shows exactly those changes (not the
// ignored build output, not .git), and the patch, applied with git apply
// to another checkout of the same commit, gives the sandbox's files.
func TestDiffAgainstGitHead(t *testing.T) {
	t.Parallel()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("git is needed on the host to make the checkout: %v", err)
	}
	e := newEnv(t, "")
	e.requireImage(t, "code-python-basic")
	svc := e.start(t)
	c := svc.client()
	repo := t.TempDir()
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command(gitBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@example.com", "GIT_COMMITTER_NAME=e2e",
			"GIT_COMMITTER_EMAIL=e2e@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	for p, data := range map[string]string{
		"app.py":     "def add(a, b):\n    return a + b\n\n\nprint(add(1, 2))\n",
		"README.md":  "# demo\n",
		"stale.txt":  "remove me\n",
		".gitignore": "__pycache__/\n*.pyc\n",
	} {
		if err := os.WriteFile(filepath.Join(repo, p), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(repo, "init", "-q", "-b", "main")
	git(repo, "add", "-A")
	git(repo, "commit", "-q", "-m", "start")
	var arch bytes.Buffer
	tw := tar.NewWriter(&arch)
	filepath.WalkDir(repo, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == repo {
			return err
		}
		fi, _ := d.Info()
		h, _ := tar.FileInfoHeader(fi, "")
		rel, _ := filepath.Rel(repo, p)
		h.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			h.Name += "/"
		}
		tw.WriteHeader(h)
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			tw.Write(b)
		}
		return nil
	})
	tw.Close()

	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			risk := "low"
			if rt == "runsc" {
				risk = "untrusted"
			}
			sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: risk})
			if _, err := c.ExtractArchive(callCtx(t), sb.ID, "/workspace", bytes.NewReader(arch.Bytes()), int64(arch.Len())); err != nil {
				t.Fatal(err)
			}
			if d, err := c.DiffSandbox(callCtx(t), sb.ID, "git"); err != nil || d.Summary.Files != 0 {
				t.Fatalf("a fresh checkout against git: %+v %v", d, err)
			}
			execOK(t, c, sb.ID, `set -e; cd /workspace
sed -i 's/a + b/a + b + 0/' app.py
printf 'def sub(a, b):\n    return a - b\n' > util.py
python3 -c 'import py_compile; py_compile.compile("util.py")'
rm stale.txt`)
			d, err := c.DiffSandbox(callCtx(t), sb.ID, "git")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range d.Files {
				got = append(got, f.Path+" "+f.Status)
			}
			want := []string{"app.py modified", "stale.txt deleted", "util.py added"}
			if !slices.Equal(got, want) || d.Base != "git" {
				t.Fatalf("diff against git: %q (base %q), want %q", got, d.Base, want)
			}
			out := svc.cli(t, "diff", sb.ID, "--base", "git")
			if out.code != 0 {
				t.Fatalf("%s", out)
			}
			clone := t.TempDir()
			git(clone, "clone", "-q", repo, ".")
			apply := exec.Command(gitBin, "apply", "-")
			apply.Dir, apply.Stdin = clone, strings.NewReader(out.stdout)
			if b, err := apply.CombinedOutput(); err != nil {
				t.Fatalf("git apply: %v: %s\n%s", err, b, out.stdout)
			}
			for _, p := range []string{"app.py", "util.py"} {
				host, _ := os.ReadFile(filepath.Join(clone, p))
				in := execOK(t, c, sb.ID, "cat /workspace/"+p).Stdout
				if string(host) != in {
					t.Errorf("%s: %q after git apply, %q in the sandbox", p, host, in)
				}
			}
			if _, err := os.Stat(filepath.Join(clone, "stale.txt")); !os.IsNotExist(err) {
				t.Errorf("stale.txt after git apply: %v", err)
			}
		})
	}
}
