package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/store/pgtest"
)

// binDir holds sandbox-service, genesis and genesis-agent, built once by
// TestMain; the service finds genesis-agent next to itself.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "genesis-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := buildBinaries(dir); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building binaries:", err)
		return 1
	}
	binDir = dir
	return pgtest.Main(m) // stops the PostgreSQL cluster a test may start
}

// buildBinaries builds the three binaries into dir. genesis-agent is static
// (CGO_ENABLED=0): it runs inside images that may have no C library.
func buildBinaries(dir string) error {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return fmt.Errorf("not inside the module (go env GOMOD = %q)", mod)
	}
	root := filepath.Dir(mod)
	builds := []struct {
		pkg, name string
		static    bool
	}{
		{"./cmd/sandbox-service", "sandbox-service", false},
		{"./cmd/genesis", "genesis", false},
		{"./cmd/genesis-agent", "genesis-agent", true},
		{"./cmd/genesis-egress", "genesis-egress", true},
	}
	if err := freshConsole(root); err != nil {
		return err
	}
	for _, b := range builds {
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, b.name), b.pkg)
		cmd.Dir = root
		cmd.Env = os.Environ()
		if b.static {
			cmd.Env = append(cmd.Env, "CGO_ENABLED=0")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	// The agent is bind-mounted into sandboxes that run as an unprivileged
	// user, through the service's copy in its data dir; keep the tree readable.
	return os.Chmod(dir, 0o755)
}

// freshConsole rebuilds the console bundle the service embeds when a
// source file is newer than it (a stale bundle fails the console tests in
// ways that point nowhere near the cause). The build is offline: it needs
// the console's npm packages, which make console installs.
func freshConsole(root string) error {
	bundle, err := os.Stat(filepath.Join(root, "internal/console/dist/app.js"))
	stale := err != nil
	if !stale {
		_ = filepath.WalkDir(filepath.Join(root, "console"), func(p string, d os.DirEntry, err error) error {
			if err != nil || stale {
				return err
			}
			if d.IsDir() && d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			if info, ierr := d.Info(); ierr == nil && !d.IsDir() && info.ModTime().After(bundle.ModTime()) {
				stale = true
			}
			return nil
		})
	}
	if !stale {
		return nil
	}
	if _, err := os.Stat(filepath.Join(root, "console/node_modules")); err != nil {
		return fmt.Errorf("the console bundle (internal/console/dist) is missing or older than console/: run make console")
	}
	cmd := exec.Command("npm", "run", "--silent", "build")
	cmd.Dir = filepath.Join(root, "console")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the console (npm run build in console/): %v\n%s", err, out)
	}
	return nil
}
