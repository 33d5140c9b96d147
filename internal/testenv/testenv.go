package testenv

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/driver/docker"
	"genesis.dev/sandbox/internal/sandbox"
)

// LabelTest marks containers and images made by tests, so leaks are easy
// to find: docker ps -a --filter label=dev.genesis.test=1.
const LabelTest = "dev.genesis.test"

// pingTimeout is how long Docker gets to answer before tests skip.
const pingTimeout = 3 * time.Second

// inCI reports whether the tests run in CI, where Docker must be present.
func inCI() bool { return os.Getenv("CI") == "true" }

// unavailable skips t, or fails it in CI, because something is missing.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if inCI() {
		t.Fatalf("CI=true but "+format, args...)
	}
	t.Skipf(format, args...)
}

// dockerHost returns DOCKER_HOST when it names a Unix socket, else "".
func dockerHost() string {
	if h := os.Getenv("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		return h
	}
	return ""
}

// Docker returns a Docker driver without an agent directory (its Probe
// cannot smoke-test runtimes; use DockerWithAgent for that). It skips t
// when the daemon does not answer within 3 s, and fails t instead when the
// environment variable CI is "true".
func Docker(t testing.TB) *docker.Driver {
	t.Helper()
	return newDocker(t, "")
}

// DockerWithAgent is Docker with AgentDir set, so Probe can smoke-run the
// agent under each runtime.
func DockerWithAgent(t testing.TB) *docker.Driver {
	t.Helper()
	Docker(t) // skip before building anything
	return newDocker(t, AgentDir(t))
}

func newDocker(t testing.TB, agentDir string) *docker.Driver {
	t.Helper()
	d, err := docker.New(docker.Config{
		Host:     dockerHost(),
		AgentDir: agentDir,
		Logger:   slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatalf("docker driver: %v", err)
	}
	t.Cleanup(d.Close)
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	if err := d.Ping(ctx); err != nil {
		unavailable(t, "docker not available: %v", err)
	}
	return d
}

// Runtimes returns the runtimes integration tests should cover: runc and,
// when Docker has it registered, runsc. A missing runsc fails t in CI.
func Runtimes(t testing.TB, d *docker.Driver) []sandbox.Runtime {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reg, err := d.RegisteredRuntimes(ctx)
	if err != nil {
		t.Fatalf("registered runtimes: %v", err)
	}
	if _, ok := reg[string(sandbox.RuntimeRunc)]; !ok {
		t.Fatalf("runc is not registered with Docker (have %v)", reg)
	}
	out := []sandbox.Runtime{sandbox.RuntimeRunc}
	if _, ok := reg[string(sandbox.RuntimeRunsc)]; ok {
		return append(out, sandbox.RuntimeRunsc)
	}
	if inCI() {
		t.Fatalf("CI=true but runsc is not registered with Docker (run scripts/host-setup.sh)")
	}
	t.Logf("runsc is not registered with Docker: testing runc only")
	return out
}

// ModuleRoot returns the directory holding the project's go.mod.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		t.Fatalf("not inside the module (go env GOMOD = %q)", mod)
	}
	return filepath.Dir(mod)
}

var agent struct {
	once sync.Once
	dir  string
	err  error
}

// AgentDir builds ./cmd/genesis-agent (static, CGO_ENABLED=0) once per test
// binary and returns the directory holding it as "genesis-agent". The
// directory is named after the binary's hash under the system temp dir, so
// identical builds share it and nothing accumulates per run; it is mode 0755
// so that a non-root sandbox user can run the agent through the bind mount.
func AgentDir(t testing.TB) string {
	t.Helper()
	agent.once.Do(func() { agent.dir, agent.err = buildAgent(ModuleRoot(t)) })
	if agent.err != nil {
		t.Fatalf("build genesis-agent: %v", agent.err)
	}
	return agent.dir
}

func buildAgent(root string) (string, error) { return buildStatic(root, "genesis-agent", "agent") }

// buildStatic builds ./cmd/<name> with CGO_ENABLED=0 and installs it by hash
// (see installByHash) in a directory for kind.
func buildStatic(root, name, kind string) (string, error) {
	if _, err := os.Stat(filepath.Join(root, "cmd", name)); err != nil {
		return "", fmt.Errorf("cmd/%s not found in %s: %w", name, root, err)
	}
	tmp, err := os.MkdirTemp("", name+"-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, name)
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/"+name)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%v: %s", err, out)
	}
	return installByHash(bin, kind)
}

// installByHash moves file into <tmp>/genesis-testenv/<kind>-<hash>/ unless
// an identical file is already there, and returns that directory.
func installByHash(file, kind string) (string, error) {
	sum, err := hashFile(file)
	if err != nil {
		return "", err
	}
	base := filepath.Join(os.TempDir(), "genesis-testenv")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	final := filepath.Join(base, kind+"-"+sum[:16])
	name := filepath.Base(file)
	if got, err := hashFile(filepath.Join(final, name)); err == nil && got == sum {
		return final, nil
	}
	stage, err := os.MkdirTemp(base, ".stage-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(stage)
	if err := os.Chmod(stage, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(file, filepath.Join(stage, name)); err != nil {
		return "", err
	}
	if err := os.Chmod(filepath.Join(stage, name), 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(stage, final); err != nil {
		// Another test binary won the race, or a broken leftover is there.
		if got, herr := hashFile(filepath.Join(final, name)); herr == nil && got == sum {
			return final, nil
		}
		if rerr := os.RemoveAll(final); rerr != nil {
			return "", errors.Join(err, rerr)
		}
		if err := os.Rename(stage, final); err != nil {
			return "", err
		}
	}
	return final, nil
}

func hashFile(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// busyboxApplets are linked into /bin of the test image.
var busyboxApplets = []string{
	"sh", "ash", "cat", "echo", "ls", "sleep", "ip", "id", "env", "mkdir", "rm", "cp", "mv",
	"true", "false", "ps", "kill", "grep", "head", "tail", "wc", "uname", "touch", "chmod",
	"test", "sed", "awk", "find", "stat", "printf", "sort", "tr", "cut", "date", "dd", "du",
	"df", "hostname", "ln", "pwd", "readlink", "seq", "tee", "timeout", "whoami", "xargs", "yes",
}

// busyboxRecipe is the rest of the image; changing it changes the image tag.
const busyboxRecipe = `root:x:0:0:root:/root:/bin/sh
sandbox:x:1000:1000:sandbox:/workspace:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
`

const busyboxGroup = "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n"

var busyboxMu sync.Mutex

// BusyboxImage imports, once per content hash, a tiny image holding the
// host's static /bin/busybox with links for common applets, /tmp and
// /workspace (mode 1777), and /etc/passwd with root, a "sandbox" user (uid
// 1000) and nobody. It returns its reference, genesis-test/busybox:<hash>,
// where the hash covers the busybox binary and this recipe. The image is a
// cache shared by test runs and is not removed.
func BusyboxImage(t testing.TB, d *docker.Driver) string {
	t.Helper()
	busyboxMu.Lock()
	defer busyboxMu.Unlock()
	bin, err := os.ReadFile("/bin/busybox")
	if err != nil {
		unavailable(t, "busybox not available (install busybox-static): %v", err)
	}
	if err := checkStatic(bin); err != nil {
		t.Fatalf("/bin/busybox: %v (install busybox-static)", err)
	}
	h := sha256.New()
	h.Write(bin)
	h.Write([]byte(strings.Join(busyboxApplets, ",") + busyboxRecipe + busyboxGroup))
	sum := hex.EncodeToString(h.Sum(nil))
	ref := "genesis-test/busybox:" + sum[:12]

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if ok, err := d.ImagePresent(ctx, ref); err != nil {
		t.Fatalf("image present %s: %v", ref, err)
	} else if ok {
		return ref
	}
	rootfs, err := busyboxRootfs(bin)
	if err != nil {
		t.Fatalf("busybox rootfs: %v", err)
	}
	labels := map[string]string{driver.LabelRecipe: sum, LabelTest: "1"}
	if err := d.ImportImage(ctx, ref, bytes.NewReader(rootfs), labels, nil); err != nil {
		t.Fatalf("import %s: %v", ref, err)
	}
	return ref
}

// checkStatic fails for a dynamically linked ELF binary.
func checkStatic(bin []byte) error {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return err
	}
	defer f.Close()
	if slices.ContainsFunc(f.Progs, func(p *elf.Prog) bool { return p.Type == elf.PT_INTERP }) {
		return errors.New("binary is dynamically linked")
	}
	return nil
}

func busyboxRootfs(bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dirs := []struct {
		name string
		mode int64
	}{
		{"bin", 0o755}, {"dev", 0o755}, {"etc", 0o755}, {"proc", 0o755}, {"root", 0o700},
		{"run", 0o755}, {"sys", 0o755}, {"tmp", 0o1777}, {"usr", 0o755}, {"usr/bin", 0o755},
		{"workspace", 0o1777},
	}
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d.name + "/", Mode: d.mode, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	files := []struct {
		name string
		mode int64
		data []byte
	}{
		{"bin/busybox", 0o755, bin},
		{"etc/passwd", 0o644, []byte(busyboxRecipe)},
		{"etc/group", 0o644, []byte(busyboxGroup)},
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	links := map[string]string{"usr/bin/env": "../../bin/busybox"}
	for _, a := range busyboxApplets {
		links["bin/"+a] = "busybox"
	}
	for _, name := range slices.Sorted(maps.Keys(links)) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: links[name], Mode: 0o777, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Chromium returns the path of Debian's chromium (installed by
// scripts/host-setup.sh) for browser tests; without it t is skipped, or
// failed in CI.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	unavailable(t, "chromium not installed (make setup installs Debian's chromium)")
	return ""
}

// Eventually polls cond every poll until it reports true or within passes,
// then fails t with what and cond's last detail.
func Eventually(t testing.TB, within, poll time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (last: %s)", what, within, detail)
		}
		time.Sleep(poll)
	}
}
