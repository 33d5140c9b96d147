package e2e

import (
	"archive/tar"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"genesis.dev/sandbox/client"
)

// seedScript is the project an agent starts from: text files, a script, a
// binary file and a file it will delete.
const seedScript = `set -e
mkdir -p /workspace/src
printf 'import sys\n\n\ndef greet(name):\n    return "hello " + name\n\n\ndef main():\n    print(greet(sys.argv[1]))\n\n\nmain()\n' > /workspace/src/app.py
printf '# Project\n\nA small project.\n' > /workspace/README.md
printf '#!/bin/sh\necho run\n' > /workspace/run.sh
printf 'obsolete\n' > /workspace/old.txt
python3 -c 'open("/workspace/data.bin","wb").write(bytes(range(256)))'
`

// editScript is what the agent changes: a line of src/app.py, a new file
// in a new directory, a deletion and a mode change.
const editScript = `set -e
sed -i 's/"hello " + name/"hello, " + name + "!"/' /workspace/src/app.py
mkdir -p /workspace/docs/notes
printf 'first note\nsecond note\n' > /workspace/docs/notes/todo.txt
rm /workspace/old.txt
chmod +x /workspace/run.sh
`

// TestDiffPatch, under runc and runsc: an agent edits a workspace that was
// snapshotted; the diff against the snapshot lists exactly its changes;
// the patch from it, applied with git apply to a host copy of the
// original, reproduces them, and so does POST …/patch on a fresh sandbox
// from the snapshot (whose diff against the edited sandbox is then
// empty). A conflicting patch, a path out of the workspace, one through a
// symbolic link out of it and a binary patch are refused and change
// nothing; the applied patch is in the sandbox's trace.
func TestDiffPatch(t *testing.T) {
	t.Parallel()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Fatalf("git is needed on the host to check the patch with git apply: %v", err)
	}
	e := newEnv(t, "")
	e.requireImage(t, "code-python-basic")
	svc := e.start(t)
	c := svc.client()
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			risk := "low"
			if rt == "runsc" {
				risk = "untrusted"
			}
			a := e.createSandbox(t, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: risk})
			execOK(t, c, a.ID, seedScript)
			noMemory := false
			snap, err := c.CreateSnapshot(callCtx(t), a.ID, client.CreateSnapshotRequest{Name: "before-agent", Memory: &noMemory})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.DeleteSnapshot(callCtx(t), snap.ID) })
			original := t.TempDir()
			extractWorkspace(t, c, a.ID, original)

			execOK(t, c, a.ID, editScript)
			d, err := c.DiffSandbox(callCtx(t), a.ID, snap.ID)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, f := range d.Files {
				got[f.Path] = f.Status
			}
			want := map[string]string{"src/app.py": "modified", "docs/notes/todo.txt": "added", "old.txt": "deleted", "run.sh": "mode_changed"}
			if len(got) != len(want) || d.Truncated || d.Base != snap.ID {
				t.Fatalf("diff against %s: %+v, want exactly %v", snap.ID, d, want)
			}
			for p, st := range want {
				if got[p] != st {
					t.Errorf("%s: %q, want %q", p, got[p], st)
				}
			}

			// The patch, through the CLI, and git apply on the host copy.
			out := svc.cli(t, "diff", a.ID, "--base", snap.ID)
			if out.code != 0 || !strings.Contains(out.stdout, "diff --git a/src/app.py b/src/app.py") {
				t.Fatalf("%s", out)
			}
			patch := out.stdout
			apply := exec.Command(gitBin, "apply", "-")
			apply.Dir, apply.Stdin = original, strings.NewReader(patch)
			if b, err := apply.CombinedOutput(); err != nil {
				t.Fatalf("git apply on the host copy: %v: %s\n%s", err, b, patch)
			}
			edited := t.TempDir()
			extractWorkspace(t, c, a.ID, edited)
			sameTrees(t, original, edited)

			// A fresh sandbox from the snapshot: a conflicting edit first.
			b := e.createSandbox(t, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: risk, SnapshotID: snap.ID})
			execOK(t, c, b.ID, `sed -i 's/"hello " + name/"hi " + name/' /workspace/src/app.py`)
			before := workspaceState(t, c, b.ID)
			patchFile := filepath.Join(t.TempDir(), "change.patch")
			if err := os.WriteFile(patchFile, []byte(patch), 0o644); err != nil {
				t.Fatal(err)
			}
			out = svc.cli(t, "patch", b.ID, patchFile)
			if out.code == 0 || !strings.Contains(out.stderr, "patch_conflict") || !strings.Contains(out.stderr, "src/app.py: hunk 1") {
				t.Errorf("a conflicting patch: %s", out)
			}
			if after := workspaceState(t, c, b.ID); after != before {
				t.Errorf("a conflicting patch changed the workspace:\nbefore %s\nafter  %s", before, after)
			}

			// Bad input: each refused with a 4xx, nothing changed.
			execOK(t, c, b.ID, "ln -s /etc /workspace/etc-link")
			before = workspaceState(t, c, b.ID)
			for name, bad := range map[string]string{
				"dot-dot":  "--- a/../etc/hostname\n+++ b/../etc/hostname\n@@ -1 +1 @@\n-x\n+pwned\n",
				"absolute": "--- /etc/hostname\n+++ /etc/hostname\n@@ -1 +1 @@\n-x\n+pwned\n",
				"symlink":  "diff --git a/etc-link/pwned b/etc-link/pwned\nnew file mode 100644\n--- /dev/null\n+++ b/etc-link/pwned\n@@ -0,0 +1 @@\n+pwned\n",
				"binary":   "diff --git a/data.bin b/data.bin\nindex 1234567..89abcde 100644\nBinary files a/data.bin and b/data.bin differ\n",
				"garbage":  "this is not a patch\n",
			} {
				_, err := c.ApplyPatch(callCtx(t), b.ID, []byte(bad), false)
				var ae *client.APIError
				if !errors.As(err, &ae) || ae.Status < 400 || ae.Status > 499 {
					t.Errorf("%s patch: %v, want a 4xx", name, err)
				} else {
					t.Logf("%s patch: %d %s: %s", name, ae.Status, ae.Problem.Code, ae.Problem.Detail)
				}
			}
			if after := workspaceState(t, c, b.ID); after != before {
				t.Errorf("a refused patch changed the workspace:\nbefore %s\nafter  %s", before, after)
			}
			if v := execOK(t, c, b.ID, "ls /etc/pwned 2>&1 || true").Stdout; !strings.Contains(v, "No such file") {
				t.Errorf("a patch reached /etc through a link: %q", v)
			}
			execOK(t, c, b.ID, "rm /workspace/etc-link")

			// Undo the conflicting edit; the patch applies and B equals A.
			execOK(t, c, b.ID, `sed -i 's/"hi " + name/"hello " + name/' /workspace/src/app.py`)
			dry, err := c.ApplyPatch(callCtx(t), b.ID, []byte(patch), true)
			if err != nil || dry.Applied || !dry.DryRun || len(dry.Files) != 4 {
				t.Fatalf("dry run: %+v %v", dry, err)
			}
			res, err := c.ApplyPatch(callCtx(t), b.ID, []byte(patch), false)
			if err != nil || !res.Applied || len(res.Files) != 4 {
				t.Fatalf("patch: %+v %v", res, err)
			}
			same, err := c.DiffSandbox(callCtx(t), b.ID, a.ID)
			if err != nil || len(same.Files) != 0 || same.Summary.Files != 0 {
				t.Errorf("the patched sandbox against the edited one: %+v %v, want no change", same, err)
			}
			fromCreation, err := c.DiffSandbox(callCtx(t), b.ID, "")
			if err != nil || fromCreation.Summary.Files != 4 || !strings.Contains(fromCreation.Base, snap.ID) {
				t.Errorf("the patched sandbox against its creation: %+v %v", fromCreation, err)
			}
			if v := execOK(t, c, b.ID, "python3 /workspace/src/app.py you; test -x /workspace/run.sh && echo x").Stdout; v != "hello, you!\nx\n" {
				t.Errorf("the patched program: %q", v)
			}
			page, err := c.TracePage(callCtx(t), b.ID, 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(page.Events, func(ev client.TraceEvent) bool {
				return ev.Kind == "files.patched" && strings.Contains(string(ev.Data), "docs/notes/todo.txt")
			}) {
				t.Errorf("no files.patched event in the trace: %+v", page.Events)
			}
			// Applying it again conflicts: the file to create exists.
			if _, err := c.ApplyPatch(callCtx(t), b.ID, []byte(patch), false); err == nil || !strings.Contains(err.Error(), "patch_conflict") {
				t.Errorf("the patch applied twice: %v", err)
			}

			// A binary change is named, never dumped.
			execOK(t, c, a.ID, `python3 -c 'open("/workspace/data.bin","wb").write(bytes(range(255,-1,-1)))'`)
			d, err = c.DiffSandbox(callCtx(t), a.ID, b.ID)
			if err != nil || len(d.Files) != 1 || d.Files[0].Path != "data.bin" || !d.Files[0].Binary ||
				!strings.Contains(d.Files[0].Diff, "Binary files a/data.bin and b/data.bin differ") || strings.Contains(d.Files[0].Diff, "\x00") {
				t.Errorf("a binary change: %+v %v", d, err)
			}
		})
	}
}

// extractWorkspace writes a sandbox's workspace (as the archive route
// gives it) into dir.
func extractWorkspace(t *testing.T, c *client.Client, id, dir string) {
	t.Helper()
	rc, err := c.ReadArchive(callCtx(t), id, "/workspace")
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			os.MkdirAll(filepath.Dir(p), 0o755)
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode).Perm())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
}

// sameTrees compares the regular files of two directories: paths,
// contents and executable bits.
func sameTrees(t *testing.T, x, y string) {
	t.Helper()
	list := func(root string) map[string]string {
		out := map[string]string{}
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fi, _ := d.Info()
			rel, _ := filepath.Rel(root, p)
			out[rel] = string(b) + "|exec=" + map[bool]string{true: "yes", false: "no"}[fi.Mode()&0o111 != 0]
			return nil
		})
		return out
	}
	a, b := list(x), list(y)
	if len(a) != len(b) {
		t.Errorf("the trees differ: %v\nand %v", slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b)))
	}
	for k, v := range a {
		if b[k] != v {
			t.Errorf("%s: %q after git apply, %q in the sandbox", k, v, b[k])
		}
	}
}

// workspaceState is a listing of the workspace with modes and checksums.
func workspaceState(t *testing.T, c *client.Client, id string) string {
	t.Helper()
	return execOK(t, c, id, "cd /workspace && find . -printf '%p %m %y\\n' | sort && find . -type f -exec sha256sum {} + | sort").Stdout
}
