package e2b

import (
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/config"
)

func TestSandboxPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"/home/user", "/workspace"},
		{"/home/user/a/b.txt", "/workspace/a/b.txt"},
		{"a/b.txt", "/workspace/a/b.txt"},
		{"./x/../y", "/workspace/y"},
		{"/home/username", "/home/username"},
		{"/tmp/x", "/tmp/x"},
		{"../../etc/passwd", "/etc/passwd"}, // the gateway's path policy refuses it
		{"/home/user/../../etc", "/etc"},
	} {
		got, err := sandboxPath(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("sandboxPath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := sandboxPath("a\x00b"); err == nil {
		t.Error("a NUL in a path was accepted")
	}
	for in, want := range map[string]string{"/workspace": "/home/user", "/workspace/a": "/home/user/a", "/workspaces": "/workspaces", "/tmp": "/tmp"} {
		if got := sdkPath(in); got != want {
			t.Errorf("sdkPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzSandboxPath(f *testing.F) {
	for _, s := range []string{"", "/home/user/x", "a/../../b", "/workspace/../home/user"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := sandboxPath(p)
		if err != nil || got == "" {
			return
		}
		if !strings.HasPrefix(got, "/") || strings.Contains(got, "/../") || strings.HasSuffix(got, "/..") {
			t.Fatalf("sandboxPath(%q) = %q: not a clean absolute path", p, got)
		}
		if got == e2bHome || strings.HasPrefix(got, e2bHome+"/") {
			t.Fatalf("sandboxPath(%q) = %q: /home/user left untranslated", p, got)
		}
	})
}

func TestEndEvent(t *testing.T) {
	t.Parallel()
	if ev := endEvent(3, "exited", ""); ev.ExitCode != 3 || !ev.Exited || ev.Status != "exit status 3" || ev.Error != nil {
		t.Errorf("exit 3: %+v", ev)
	}
	if ev := endEvent(0, "canceled", "SIGKILL"); ev.ExitCode != -1 || ev.Exited || ev.Status != "signal: SIGKILL" {
		t.Errorf("killed: %+v", ev)
	}
	if ev := endEvent(0, "timeout", ""); ev.ExitCode == 0 || ev.Error == nil || *ev.Error != "timeout" {
		t.Errorf("timeout: %+v", ev)
	}
}

func TestProfileOf(t *testing.T) {
	t.Parallel()
	a := &Adapter{set: config.E2B{Templates: map[string]string{"base": "tool-basic", "code-interpreter-v1": "code-python-basic"}}}
	if p, err := a.profileOf(""); err != nil || p != "tool-basic" {
		t.Errorf("default template: %q %v", p, err)
	}
	if p, err := a.profileOf("code-interpreter-v1"); err != nil || p != "code-python-basic" {
		t.Errorf("code-interpreter-v1: %q %v", p, err)
	}
	if _, err := a.profileOf("desktop"); err == nil || !strings.Contains(err.Error(), "base, code-interpreter-v1") {
		t.Errorf("unknown template: %v", err)
	}
}

func TestPermString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		typ  string
		mode uint32
		want string
	}{{"file", 0o644, "-rw-r--r--"}, {"dir", 0o755, "drwxr-xr-x"}, {"symlink", 0o777, "lrwxrwxrwx"}} {
		if got := permString(tc.typ, tc.mode); got != tc.want {
			t.Errorf("permString(%s, %o) = %s, want %s", tc.typ, tc.mode, got, tc.want)
		}
	}
}

func TestHostTarget(t *testing.T) {
	for _, c := range []struct {
		domain, host string
		port         int
		id           string
		ok           bool
	}{
		{"e2b.example.com", "49983-sbx_abc.e2b.example.com", 49983, "sbx_abc", true},
		{"e2b.example.com", "49983-sbx_abc.e2b.example.com:443", 49983, "sbx_abc", true}, // a port on the host is ignored
		{"e2b.example.com", "8000-sbx_abc.E2B.example.com", 8000, "sbx_abc", true},
		{"e2b.test:8443", "49999-sbx_x.e2b.test:8443", 49999, "sbx_x", true},
		{"e2b.test:8443", "49999-sbx_x.e2b.test:9999", 0, "", false}, // the domain's port must match
		{"e2b.example.com", "e2b.example.com", 0, "", false},
		{"e2b.example.com", "a.49983-sbx.e2b.example.com", 0, "", false},
		{"e2b.example.com", "49983sbx.e2b.example.com", 0, "", false},
		{"e2b.example.com", "0-sbx.e2b.example.com", 0, "", false},
		{"e2b.example.com", "70000-sbx.e2b.example.com", 0, "", false},
		{"e2b.example.com", "49983-sbx.other.com", 0, "", false},
		{"", "49983-sbx.e2b.example.com", 0, "", false},
	} {
		a := &Adapter{}
		a.set.SandboxDomain = c.domain
		port, id, ok := a.HostTarget(c.host)
		if port != c.port || id != c.id || ok != c.ok {
			t.Errorf("HostTarget(%q) with domain %q = %d %q %v, want %d %q %v", c.host, c.domain, port, id, ok, c.port, c.id, c.ok)
		}
	}
}
