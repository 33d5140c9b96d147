package agentproto

import (
	"errors"
	"io/fs"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"genesis.dev/sandbox/internal/errdefs"
)

func TestResolvePath(t *testing.T) {
	t.Parallel()
	roots := []string{"/workspace", "/workspace/deep", "/data"}
	tests := []struct {
		in        string
		root, rel string
		code      string // expected problem code when refused
	}{
		{in: "/workspace", root: "/workspace", rel: "."},
		{in: "/workspace/", root: "/workspace", rel: "."},
		{in: "/workspace/a/b.txt", root: "/workspace", rel: "a/b.txt"},
		{in: "/workspace//a/./b.txt", root: "/workspace", rel: "a/b.txt"},
		{in: "/workspace/a/../b", root: "/workspace", rel: "b"},
		{in: "a/b", root: "/workspace", rel: "a/b"},
		{in: "./a", root: "/workspace", rel: "a"},
		{in: ".", root: "/workspace", rel: "."},
		{in: "/workspace/deep/x", root: "/workspace/deep", rel: "x"}, // longest root wins
		{in: "/data/x", root: "/data", rel: "x"},
		{in: "/./workspace/x", root: "/workspace", rel: "x"},
		{in: "/workspace/line\nbreak", root: "/workspace", rel: "line\nbreak"},
		{in: "/workspace/%2e%2e/etc", root: "/workspace", rel: "%2e%2e/etc"}, // a name, not an escape
		{in: "/workspace/..", code: CodePathOutsideRoot},
		{in: "/workspace/../etc/passwd", code: CodePathOutsideRoot},
		{in: "/workspace/a/../../etc", code: CodePathOutsideRoot},
		{in: "../etc/passwd", code: CodePathOutsideRoot},
		{in: "a/../../x", code: CodePathOutsideRoot},
		{in: "..", code: CodePathOutsideRoot},
		{in: "/etc/passwd", code: CodePathOutsideRoot},
		{in: "/", code: CodePathOutsideRoot},
		{in: "/workspace2/x", code: CodePathOutsideRoot},
		{in: "/workspac", code: CodePathOutsideRoot},
		{in: "/proc/self/root/etc/passwd", code: CodePathOutsideRoot},
		{in: "", code: CodeInvalidPath},
		{in: "/workspace/a\x00b", code: CodeInvalidPath},
		{in: "/workspace/\xff", code: CodeInvalidPath},
		{in: "/workspace/" + strings.Repeat("n", 256), code: CodePathTooLong},
		{in: "/workspace/" + strings.Repeat("a/", 2100), code: CodePathTooLong},
	}
	for _, tc := range tests {
		root, rel, err := ResolvePath(roots, tc.in)
		if tc.code != "" {
			if !errors.Is(err, errdefs.ErrInvalidArgument) || errdefs.Code(err) != tc.code {
				t.Errorf("ResolvePath(%q) = %q, %q, %v; want code %s", tc.in, root, rel, err, tc.code)
			}
			continue
		}
		if err != nil || root != tc.root || rel != tc.rel {
			t.Errorf("ResolvePath(%q) = %q, %q, %v; want %q, %q", tc.in, root, rel, err, tc.root, tc.rel)
		}
	}
	if _, _, err := ResolvePath([]string{"/"}, "/etc/passwd"); err != nil {
		t.Errorf("root / refuses /etc/passwd: %v", err)
	}
	if _, _, err := ResolvePath(nil, "/workspace"); err == nil {
		t.Errorf("no roots accepted a path")
	}
}

func TestParseMode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want fs.FileMode
		ok   bool
	}{
		{"", 0o640, true}, {"644", 0o644, true}, {"0644", 0o644, true}, {"0o755", 0o755, true},
		{"1777", 0o777 | fs.ModeSticky, true}, {"4755", 0o755 | fs.ModeSetuid, true}, {"2700", 0o700 | fs.ModeSetgid, true},
		{"0", 0, true}, {"8", 0, false}, {"10000", 0, false}, {"-1", 0, false}, {"rwx", 0, false}, {"0x1ff", 0, false},
		{"000000644", 0, false},
	}
	for _, tc := range tests {
		got, err := ParseMode(tc.in, 0o640)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseMode(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && tc.in != "" {
			if back, _ := ParseMode(FormatMode(got), 0); back != got {
				t.Errorf("FormatMode(%v) = %q does not parse back", got, FormatMode(got))
			}
		}
	}
}

func TestParseRoots(t *testing.T) {
	t.Parallel()
	if r, err := ParseRoots(""); err != nil || len(r) != 1 || r[0] != DefaultFileRoot {
		t.Errorf("ParseRoots(\"\") = %v, %v", r, err)
	}
	if r, err := ParseRoots("/a:/b/c"); err != nil || len(r) != 2 || r[1] != "/b/c" {
		t.Errorf("ParseRoots = %v, %v", r, err)
	}
	if r, err := ParseRoots("/workspace:/tmp:~"); err != nil || strings.Join(r, " ") != "/workspace /tmp ~" {
		t.Errorf("ParseRoots with the home = %v, %v", r, err)
	}
	for _, bad := range []string{"rel", "/a/../b", "/a/", "~user", "~/x"} {
		if _, err := ParseRoots(bad); err == nil {
			t.Errorf("ParseRoots(%q) accepted", bad)
		}
	}
}

func TestCheckRoot(t *testing.T) {
	t.Parallel()
	own := []string{"/.genesis", "/run/genesis"}
	for _, ok := range []string{"/workspace", "/tmp", "/home/sandbox", "/run/other", "/devices", "/process", "/.genesis2", "/var/tmp"} {
		if err := CheckRoot(ok, own...); err != nil {
			t.Errorf("CheckRoot(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"/", "", "rel", "/a/", "/a/../b", "~", "/proc", "/proc/self/root", "/sys", "/sys/fs/cgroup", "/dev",
		"/dev/shm", "/.genesis", "/.genesis/bin", "/run", "/run/genesis", "/run/genesis/sub", "/a\x00b"} {
		if err := CheckRoot(bad, own...); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("CheckRoot(%q) = %v, want refused", bad, err)
		}
	}
	if err := CheckRoot("/tmp", "/tmp/agent-run"); err == nil {
		t.Error("a root holding the agent's own directory was accepted")
	}
}

// FuzzCheckRoot checks that no path the policy accepts under a root that
// CheckRoot accepts reaches /proc, /sys, /dev or the agent's own
// directories, whatever the root and the path.
func FuzzCheckRoot(f *testing.F) {
	for _, s := range [][2]string{{"/tmp", "/tmp/x"}, {"/tmp", "../proc/self/root"}, {"/home/sandbox", "/home/sandbox/../../proc"},
		{"/run", "/run/genesis/agent.sock"}, {"/", "/etc/passwd"}, {"/proc", "/proc/1/environ"}, {"/.genesis", "/.genesis/genesis-agent"}} {
		f.Add(s[0], s[1])
	}
	own := []string{"/.genesis", "/run/genesis"}
	f.Fuzz(func(t *testing.T, root, p string) {
		if CheckRoot(root, own...) != nil {
			return
		}
		r, rel, err := ResolvePath([]string{root}, p)
		if err != nil {
			return
		}
		full := JoinRoot(r, rel)
		for _, place := range append([]string{"/proc", "/sys", "/dev"}, own...) {
			if within(place, full) || within(full, place) {
				t.Fatalf("root %q accepted %q, which resolves to %q and reaches %s", root, p, full, place)
			}
		}
	})
}

// FuzzResolvePath checks the path policy's invariants on any input: an
// accepted path lies in the root it was mapped to, its relative part is
// local and clean, and joining them names the same place the input did.
func FuzzResolvePath(f *testing.F) {
	for _, s := range []string{"/workspace/a", "a/../b", "../x", "/workspace/../etc", "/", "", ".", "/workspace/\xff",
		"/workspace2", "a\x00b", "//workspace//a//", "/workspace/a/./../../b", "%2e%2e/x"} {
		f.Add(s)
	}
	roots := []string{"/workspace", "/data/in"}
	f.Fuzz(func(t *testing.T, p string) {
		root, rel, err := ResolvePath(roots, p)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("ResolvePath(%q): error %v is not invalid_argument", p, err)
			}
			return
		}
		if !utf8.ValidString(p) || strings.IndexByte(p, 0) >= 0 || len(p) > MaxPathBytes {
			t.Fatalf("ResolvePath(%q) accepted a path the policy refuses", p)
		}
		if root != roots[0] && root != roots[1] {
			t.Fatalf("ResolvePath(%q): root %q is not an allowed root", p, root)
		}
		if !filepath.IsLocal(rel) || path.Clean(rel) != rel || strings.Contains("/"+rel+"/", "/../") {
			t.Fatalf("ResolvePath(%q): rel %q is not local and clean", p, rel)
		}
		full := JoinRoot(root, rel)
		if !within(root, full) {
			t.Fatalf("ResolvePath(%q) = %q outside %q", p, full, root)
		}
		want := p
		if !path.IsAbs(p) {
			want = roots[0] + "/" + p
		}
		if path.Clean(want) != full {
			t.Fatalf("ResolvePath(%q) = %q, lexically %q", p, full, path.Clean(want))
		}
	})
}

// FuzzResolveBelow checks the policy of names relative to a directory (the
// file names of a multipart upload) on any directory and name: an accepted
// name lands strictly below the directory, clean, inside a root.
func FuzzResolveBelow(f *testing.F) {
	for _, s := range []string{"a", "a/b", "../a", "a/../../b", "/abs", "", ".", "a/./b", "..%2fa", "a\x00", "\xff", "a//b/", "./..", "x/.."} {
		f.Add("/workspace/up", s)
	}
	f.Add("/workspace", "../data/in/x")
	roots := []string{"/workspace", "/data/in"}
	f.Fuzz(func(t *testing.T, dir, name string) {
		root, rel, err := ResolvePath(roots, dir)
		if err != nil {
			return
		}
		d := JoinRoot(root, rel)
		got, err := ResolveBelow(roots, d, name)
		if err != nil {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("ResolveBelow(%q, %q): error %v is not invalid_argument", d, name, err)
			}
			return
		}
		if !strings.HasPrefix(got, d+"/") {
			t.Fatalf("ResolveBelow(%q, %q) = %q, not below the directory", d, name, got)
		}
		if path.Clean(got) != got || strings.Contains(got+"/", "/../") {
			t.Fatalf("ResolveBelow(%q, %q) = %q is not clean", d, name, got)
		}
		if !within(roots[0], got) && !within(roots[1], got) {
			t.Fatalf("ResolveBelow(%q, %q) = %q outside the roots", d, name, got)
		}
	})
}
