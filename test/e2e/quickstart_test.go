package e2e

import (
	"context"
	"os"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/sandbox"
)

// gvisorKernel is what uname -r reports inside a current gVisor sandbox.
const gvisorKernel = "4.19.0-gvisor"

// TestQuickstartCLI walks the README's quickstart with the real genesis CLI:
// create, exec (kernel, stdout/stderr split, exit status), ls, rm; then the
// record says destroyed and Docker has no container of the sandbox left.
func TestQuickstartCLI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	hostKernel := strings.TrimSpace(string(b))

	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			r := svc.cli(t, "sandbox", "create", "--profile", "tool-basic", "--runtime", rt)
			if r.code != 0 {
				t.Fatalf("create: %v", r)
			}
			id := strings.TrimSpace(r.stdout)
			if !sandbox.ValidID("sbx", id) {
				t.Fatalf("create printed %q, want a sandbox id alone", r.stdout)
			}
			e.deleteOnCleanup(t, id)

			wantKernel := hostKernel
			if rt == "runsc" {
				wantKernel = gvisorKernel
			}
			r = svc.cli(t, "exec", id, "--", "uname", "-r")
			if r.code != 0 || r.stdout != wantKernel+"\n" || r.stderr != "" {
				t.Errorf("uname -r under %s: want stdout %q, exit 0, no stderr; got %v", rt, wantKernel+"\n", r)
			}

			r = svc.cli(t, "exec", id, "--", "sh", "-c", "echo out; echo err >&2; exit 7")
			if r.code != 7 || r.stdout != "out\n" || r.stderr != "err\n" {
				t.Errorf("want exit 7, stdout %q, stderr %q; got %v", "out\n", "err\n", r)
			}

			r = svc.cli(t, "sandbox", "ls")
			if r.code != 0 || !hasRow(r.stdout, id, "ready", "tool-basic", rt) {
				t.Errorf("sandbox ls does not list %s as ready tool-basic %s: %v", id, rt, r)
			}

			r = svc.cli(t, "sandbox", "rm", id)
			if r.code != 0 || r.stdout != id+"\n" {
				t.Fatalf("rm: want exit 0 and %q; got %v", id+"\n", r)
			}
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			sb, err := svc.client().GetSandbox(ctx, id)
			if err != nil {
				t.Fatalf("get after rm: %v", err)
			}
			if sb.State != "destroyed" {
				t.Errorf("after rm the sandbox is %s, want destroyed", sb.State)
			}
			if left := sandboxContainers(t, id); len(left) != 0 {
				t.Errorf("after rm Docker still has containers of %s: %v", id, left)
			}
		})
	}
}

// hasRow reports whether a table has a row whose leading columns are cols.
func hasRow(table string, cols ...string) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) < len(cols) {
			continue
		}
		match := true
		for i, c := range cols {
			if f[i] != c {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}
