package agent

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// These tests never start processes: the subprocess tests in agent_test.go
// cover that, since the reaper must not share a process with os/exec.

func TestParseOOMKill(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", 3, true},
		{"low 0\nhigh 0\nmax 0\noom 1\noom_kill 12\noom_group_kill 0\n", 12, true},
		{"oom_kill_disable 0\nunder_oom 0\n", 0, false},
		{"oom_kill x\n", 0, false},
		{"", 0, false},
		{"oom_kill 7", 7, true},
	}
	for _, tc := range tests {
		got, ok := parseOOMKill([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseOOMKill(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestOOMCounterPicksReadableFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	v2 := filepath.Join(dir, "memory.events")
	if err := os.WriteFile(v2, []byte("oom 0\noom_kill 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newOOMCounter([]string{filepath.Join(dir, "missing"), v2})
	if n, ok := c.read(); !ok || n != 2 {
		t.Fatalf("read = %d, %v; want 2, true", n, ok)
	}
	// The file is kept open: a later read sees the counter as it is then.
	if err := os.WriteFile(v2, []byte("oom 1\noom_kill 13\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n, ok := c.read(); !ok || n != 13 {
		t.Fatalf("read after a change = %d, %v; want 13, true", n, ok)
	}
	if _, ok := newOOMCounter([]string{filepath.Join(dir, "missing")}).read(); ok {
		t.Fatal("counter without a file reads ok")
	}
}

func TestBaseEnv(t *testing.T) {
	t.Parallel()
	b := newBaseEnv([]string{"HOME=/home/u", "GENESIS_AGENT_TOKEN=x", "FOO=1", "junk", "=bad"}, "/")
	want := []string{"FOO=1", "HOME=/home/u", "LANG=C.UTF-8", "PATH=" + DefaultPath}
	if !slices.Equal(b.list, want) {
		t.Errorf("base = %q, want %q", b.list, want)
	}
	env, path, err := b.with(map[string]string{"FOO": "2", "PATH": "/x:/y", "NEW": "v"})
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"HOME=/home/u", "LANG=C.UTF-8", "FOO=2", "NEW=v", "PATH=/x:/y"}
	if !slices.Equal(env, want) || !slices.Equal(path, []string{"/x", "/y"}) {
		t.Errorf("overlaid = %q %q", env, path)
	}
	for _, bad := range []map[string]string{{"": "v"}, {"A=B": "v"}, {"A": "v\x00"}} {
		if _, _, err := b.with(bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("with(%q) err = %v, want ErrInvalidArgument", bad, err)
		}
	}
}

func newTestServer(t testing.TB) *Server {
	t.Helper()
	s, err := New(Config{SocketPath: "/nonexistent/a.sock", DefaultWorkdir: "/nonexistent-workspace"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.env = newBaseEnv(nil, "/")
	return s
}

func TestPrepare(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	j, re, err := s.prepare(&agentproto.ExecRequest{Script: "echo hi", Cwd: "tmp", TimeoutMS: 1500, KillGraceMS: 20})
	if err != nil || re != nil {
		t.Fatalf("prepare: %v %v", err, re)
	}
	if j.argv0 != "/bin/sh" && j.argv0 != "/usr/bin/sh" {
		t.Errorf("argv0 = %q", j.argv0)
	}
	if !slices.Equal(j.argv, []string{"/bin/sh", "-c", "echo hi"}) || j.dir != "/tmp" ||
		j.timeout.Milliseconds() != 1500 || j.grace.Milliseconds() != 20 || j.maxOut != agentproto.DefaultMaxOutputBytes {
		t.Errorf("job = %+v", j)
	}

	_, re, err = s.prepare(&agentproto.ExecRequest{Command: []string{"definitely-not-a-command"}})
	if err != nil || re == nil || re.code != 127 {
		t.Errorf("missing command: %v %+v", err, re)
	}
	_, re, err = s.prepare(&agentproto.ExecRequest{Command: []string{"true"}, Cwd: "/etc/passwd"})
	if err != nil || re == nil || re.code != 126 {
		t.Errorf("file as cwd: %v %+v", err, re)
	}
	for name, req := range map[string]agentproto.ExecRequest{
		"neither":      {},
		"both":         {Command: []string{"true"}, Script: "x"},
		"empty argv":   {Command: []string{}},
		"empty argv0":  {Command: []string{""}},
		"nul arg":      {Command: []string{"echo", "a\x00b"}},
		"nul cwd":      {Command: []string{"true"}, Cwd: "/\x00"},
		"neg grace":    {Command: []string{"true"}, KillGraceMS: -5},
		"neg cap":      {Command: []string{"true"}, MaxOutputBytes: -1},
		"cap too high": {Command: []string{"true"}, MaxOutputBytes: 1 << 30},
	} {
		if _, _, err := s.prepare(&req); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: err = %v, want ErrInvalidArgument", name, err)
		}
	}
}

func FuzzPrepare(f *testing.F) {
	f.Add([]byte(`{"command":["echo","hi"],"env":{"A":"b"}}`))
	f.Add([]byte(`{"script":"exit 3","cwd":"x/../y","timeout_ms":5}`))
	f.Add([]byte(`{"command":[""],"shell":"sh"}`))
	s := newTestServer(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var req agentproto.ExecRequest
		if json.Unmarshal(data, &req) != nil {
			return
		}
		j, re, err := s.prepare(&req)
		switch {
		case err != nil:
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Fatalf("error of the wrong class: %v", err)
			}
		case re != nil:
			if re.code != 126 && re.code != 127 {
				t.Fatalf("run error code %d", re.code)
			}
		default:
			if !filepath.IsAbs(j.argv0) || !filepath.IsAbs(j.dir) || len(j.argv) == 0 {
				t.Fatalf("unusable job %+v", j)
			}
		}
	})
}

func TestIsLegacyShim(t *testing.T) {
	tests := []struct {
		env  string
		args []string
		want bool
	}{
		{"1", []string{"genesis-agent-shim", "serve", "spare"}, true},
		{"", []string{"genesis-agent-shim", "serve", "spare"}, false},
		{"1", []string{"genesis-agent", "serve", "--socket"}, false},
		{"1", []string{"genesis-agent-shim", "shim", "spare"}, false}, // the current start: the shim subcommand
		{"0", []string{"genesis-agent-shim", "serve", "spare"}, false},
	}
	for _, tc := range tests {
		t.Setenv(ShimEnvVar, tc.env)
		if got := IsLegacyShim(tc.args); got != tc.want {
			t.Errorf("IsLegacyShim(%q) with %s=%q = %v, want %v", tc.args, ShimEnvVar, tc.env, got, tc.want)
		}
	}
	if got := shimArgs(); !slices.Equal(got, []string{shimArgv0, ShimCommand, shimArgSpare}) {
		t.Errorf("shimArgs() = %q", got)
	}
}

func TestEffectiveRoots(t *testing.T) {
	t.Parallel()
	own := []string{"/.genesis", "/run/genesis"}
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		roots []string
		home  string
		want  string
	}{
		{[]string{"/workspace", "/tmp", "~"}, "/home/sandbox", "/workspace /tmp /home/sandbox"},
		{[]string{"/workspace", "/tmp", "~"}, "", "/workspace /tmp"},                              // no home: no such root
		{[]string{"/workspace", "/tmp", "~"}, "/workspace", "/workspace /tmp"},                    // once each
		{[]string{"/workspace", "~"}, "/", "/workspace"},                                          // a home of / is not a root
		{[]string{"~", "/workspace"}, "/run/genesis", "/workspace"},                               // nor one in the agent's directory
		{[]string{"/workspace", "/proc", "/", "/run", "/dev/shm", "/.genesis"}, "", "/workspace"}, // dropped, never widened
		{[]string{"/tmp"}, "", "/tmp"},
	} {
		if got := strings.Join(effectiveRoots(tc.roots, tc.home, own, log), " "); got != tc.want {
			t.Errorf("effectiveRoots(%v, home %q) = %q, want %q", tc.roots, tc.home, got, tc.want)
		}
	}
}
