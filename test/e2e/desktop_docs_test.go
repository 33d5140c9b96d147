package e2e

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/testenv"
)

// docsBlock returns the first fenced code block of kind (```sh) in a page
// of docs/.
func docsBlock(t *testing.T, page, kind string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(t), "docs", page))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n```"+kind+"\n")
	if !ok {
		t.Fatalf("docs/%s has no ```%s block", page, kind)
	}
	block, _, ok := strings.Cut(rest, "\n```")
	if !ok {
		t.Fatalf("docs/%s: the ```%s block does not end", page, kind)
	}
	return block + "\n"
}

// TestDesktopDocsExample runs the first example of docs/desktop.md as
// printed, with bash, its bin/ the binaries under test and GENESIS_URL and
// GENESIS_API_KEY set as a reader would: the profile's default runtime
// (runsc), an xterm launched and waited for, its window listed, a
// screenshot that shows it drawn on the black desktop, control taken and
// released, the sandbox removed.
func TestDesktopDocsExample(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "desktop-vnc")
	svc := e.start(t)
	script := docsBlock(t, "desktop.md", "sh")
	for _, want := range []string{"wait_for_window", "desktop screenshot", "sandbox rm"} {
		if !strings.Contains(script, want) {
			t.Fatalf("the example no longer has %q:\n%s", want, script)
		}
	}
	dir := t.TempDir()
	if err := os.Symlink(binDir, filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	// The reader's shell stops at the first failing command; the trap tells
	// the test the sandbox to clean up if one did.
	cmd := exec.CommandContext(callCtx(t), "bash", "-c", "set -eo pipefail\ntrap 'echo \"SB=$SB\" >&2' EXIT\n"+script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), client.EnvURL+"="+svc.url(), client.EnvAPIKey+"="+e.apiKey)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var id string
	if m := regexp.MustCompile(`SB=(sbx_\w+)`).FindStringSubmatch(stderr.String()); m != nil {
		id = m[1]
		e.deleteOnCleanup(t, id)
	}
	if err != nil {
		t.Fatalf("the example failed: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("stdout:\n%s", stdout.String())
	out := stdout.String()
	if !regexp.MustCompile(`(?m)^1\twait_for_window\ttrue\t\d+ms\t1 window\n\twindow 0x[0-9a-f]+ ".*" class XTerm at `).MatchString(out) ||
		!regexp.MustCompile(`(?m)^2\tlist_windows\ttrue\t\d+ms\t\d+ windows?\n(\twindow .*\n)*\twindow 0x[0-9a-f]+ ".*" class XTerm at `).MatchString(out) ||
		!regexp.MustCompile(`(?m)^0\tlaunch\ttrue\t\d+ms\tjob \S+$`).MatchString(out) {
		t.Errorf("desktop actions printed:\n%s", out)
	}

	sb, err := svc.client().GetSandbox(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Runtime != "runsc" || sb.State != "destroyed" {
		t.Errorf("the example's sandbox ran under %s and is %s, want runsc and destroyed", sb.Runtime, sb.State)
	}

	f, err := os.Open(filepath.Join(dir, "shot.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if img.Bounds() != image.Rect(0, 0, 1024, 640) {
		t.Errorf("shot.png is %v, want 1024x640", img.Bounds())
	}
	// X's bare root window is black: the xterm (white, ~480x316 of
	// 1280x800) must show as a drawn area.
	lit, all := 0, 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r+g+bl > 3*0x4000 {
				lit++
			}
			all++
		}
	}
	if lit*100 < all*5 {
		t.Errorf("shot.png is %d%% lit: a black screen, not the xterm", lit*100/all)
	}
	if raw, err := os.ReadFile(filepath.Join(dir, "shot.png")); err == nil {
		_ = os.WriteFile(filepath.Join(consoleArtifacts(t, "desktop-docs"), "shot.png"), raw, 0o644)
	}
}
