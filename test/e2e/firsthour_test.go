package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/testenv"
)

// TestBackgroundJobOutlivesExecDefault, under runc and runsc: the
// README's ports example with limits.default_exec_timeout_ms at 2 s. The
// background python3 -m http.server has no time limit in its record and
// still answers through the port proxy after a synchronous exec was killed
// at that default; once the job is cancelled, the proxy's 502 says that
// nothing listens and names the job that served the port and how it ended.
func TestBackgroundJobOutlivesExecDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "limits: {default_exec_timeout_ms: 2000}\n")
	e.requireImage(t, "code-python-basic")
	svc := e.start(t)
	c := svc.client()
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: "low"})
			r := svc.cli(t, "exec", "--background", "--cwd", "/tmp", sb.ID, "--", "python3", "-m", "http.server", "8000", "--bind", "127.0.0.1")
			if r.code != 0 {
				t.Fatalf("start the server: %s", r)
			}
			jobID := strings.TrimSpace(r.stdout)
			job, err := c.GetJob(callCtx(t), jobID)
			if err != nil {
				t.Fatal(err)
			}
			if job.TimeoutMS != 0 || job.Mode != "background" || job.State != "running" {
				t.Fatalf("background job %+v; want running, background, no timeout_ms", job)
			}
			port := svc.url() + "/v1/sandboxes/" + sb.ID + "/ports/8000/"
			get := func() (int, string) {
				return e2bRequest(t, "GET", port, "", map[string]string{"Authorization": "Bearer " + e.apiKey})
			}
			eventually(t, 30*time.Second, "the server answers through the proxy", func() (bool, string) {
				code, body := get()
				return code == 200, fmt.Sprintf("%d %.200s", code, body)
			})

			// The configured default applies to a synchronous exec: it
			// is killed at 2 s (exit 124), while the server runs on.
			start := time.Now()
			if r := svc.cli(t, "exec", sb.ID, "--", "sleep", "30"); r.code != 124 {
				t.Errorf("sync exec without --timeout: %s; want exit 124 at the 2 s default", r)
			}
			if took := time.Since(start); took < 2*time.Second || took > 25*time.Second {
				t.Errorf("the sync exec took %v, want about the 2 s default", took)
			}
			if code, body := get(); code != 200 {
				t.Errorf("after the exec default passed the server answers %d %.200s, want 200", code, body)
			}
			if job, err := c.GetJob(callCtx(t), jobID); err != nil || job.State != "running" {
				t.Errorf("after the exec default passed the background job is %+v (%v), want running", job, err)
			}

			// Cancelled, the job leaves the port: the 502 says so.
			if _, err := c.CancelJob(callCtx(t), jobID); err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, "the job ends", func() (bool, string) {
				j, err := c.GetJob(callCtx(t), jobID)
				return err == nil && j.State == "canceled", fmt.Sprint(j, err)
			})
			code, body := get()
			want := regexp.MustCompile(`nothing listens on port 8000 in the sandbox \(on 127\.0\.0\.1\); the background job ` + jobID +
				` \(python3 -m http\.server 8000 --bind 127\.0\.0\.1\) that names this port exited at [0-9TZ:-]+ \(exit_reason canceled\)`)
			if code != 502 || !strings.Contains(body, `"code":"port_unreachable"`) || !want.MatchString(body) {
				t.Errorf("a port whose server was cancelled: %d %s", code, body)
			}
		})
	}
}

// TestFirstErrorsReadAsSentences, under runc and runsc: the failures a
// newcomer meets first reach the CLI as one sentence, with the stable code,
// without a part said twice, an internal route or client name, and with a
// hint that names a command or flag: a full workspace (a disk quota), an
// unknown sandbox, an unknown profile. A bad config stops the service with
// one line naming the key.
func TestFirstErrorsReadAsSentences(t *testing.T) {
	t.Parallel()
	t.Run("config", func(t *testing.T) {
		t.Parallel()
		testenv.Docker(t)
		dir := t.TempDir()
		for _, c := range []struct{ yaml, want string }{
			{"limits: {default_exec_timeout_ms: 99999999}\n", "sandbox-service: config: limits.default_exec_timeout_ms: exceeds limits.max_exec_timeout_ms\n"},
			{"limitz: {}\n", "line 1: unknown key limitz\n"},
		} {
			p := filepath.Join(dir, "bad.yaml")
			if err := os.WriteFile(p, []byte(c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(filepath.Join(binDir, "sandbox-service"), "serve", "--config", p, "--data-dir", filepath.Join(dir, "d"), "--addr", "127.0.0.1:0")
			cmd.Env = append(os.Environ(), "GENESIS_CONFIG=", "GENESIS_API_KEY=")
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.HasSuffix(string(out), c.want) || strings.Contains(string(out), "invalid argument") {
				t.Errorf("config %q: %v, output %q; want exit 1 ending in %q", c.yaml, err, out, c.want)
			}
		}
	})
	e, svc, _ := quotaEnv(t, "")
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, make([]byte, 24<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt, RiskLevel: "low",
				Resources: &client.Resources{DiskMB: 16}})
			for _, c := range []struct {
				args      []string
				msg, hint string
			}{
				{[]string{"cp", big, sb.ID + ":/workspace/big"},
					`genesis: write "/workspace/big": no space left on device (no_space, request id `, "--disk-mb"},
				{[]string{"sandbox", "get", "sbx_0000000000000000"},
					`sbx_0000000000000000: not found (not_found, request id `, ""},
				{[]string{"sandbox", "create", "--profile", "nope"},
					`genesis: unknown profile "nope"; the profiles are `, "hint: `genesis profiles` lists the profiles"},
			} {
				r := svc.cli(t, c.args...)
				lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
				if r.code != 1 || !strings.HasPrefix(lines[0], "genesis: ") || !strings.Contains(lines[0], c.msg) || (c.hint != "") != (len(lines) == 2) ||
					(c.hint != "" && !strings.Contains(lines[1], c.hint)) {
					t.Errorf("%s; want %q and a hint %q", r, c.msg, c.hint)
					continue
				}
				parts := strings.Split(lines[0], ": ")
				for i := 1; i < len(parts); i++ {
					if parts[i] == parts[i-1] {
						t.Errorf("%q says %q twice", lines[0], parts[i])
					}
				}
				for _, bad := range []string{"agentclient", "agent answered", "/v1/", "too large", "invalid argument"} {
					if strings.Contains(r.stderr, bad) {
						t.Errorf("%q names %q", r.stderr, bad)
					}
				}
			}
		})
	}
}

// TestSignalsDrain: SIGINT (Ctrl-C) drains as SIGTERM does, destroying
// the instance's sandboxes; a second signal during a drain that waits for
// a lease stops at once and leaves the sandbox for the next start, which
// adopts it; and SIGTERM with an MCP server running does not wait the
// drain timeout for the server's own lease.
func TestSignalsDrain(t *testing.T) {
	t.Parallel()
	const drain = "60s" // longer than any wait below: a drain that waits it fails them
	cfg := fmt.Sprintf("intervals: {drain_timeout: %s}\n", drain)
	stopped := func(t *testing.T, svc *service, within time.Duration) time.Duration {
		t.Helper()
		start := time.Now()
		select {
		case <-svc.done:
		case <-time.After(within):
			t.Fatalf("the service did not exit within %v", within)
		}
		return time.Since(start)
	}

	t.Run("sigint drains", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, cfg)
		e.requireImage(t, "tool-basic")
		svc := e.start(t)
		sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: "runc", RiskLevel: "low"})
		if err := svc.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		stopped(t, svc, 50*time.Second)
		if left := sandboxContainers(t, sb.ID); len(left) != 0 {
			t.Errorf("after SIGINT the sandbox's containers are left: %v", left)
		}
		if !strings.Contains(svc.log.String(), "signal=interrupt") || !strings.Contains(svc.log.String(), "drained") {
			t.Errorf("the log does not tell of a drain on SIGINT:\n%s", svc.log.String())
		}
	})

	t.Run("second signal forces", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, cfg)
		e.requireImage(t, "tool-basic")
		svc := e.start(t)
		c := svc.client()
		l, err := c.AcquireLease(callCtx(t), client.AcquireLeaseRequest{Profile: "tool-basic", Runtime: "runc", RiskLevel: "low"})
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "the service drains (503 service_draining)", func() (bool, string) {
			_, err := c.CreateSandbox(callCtx(t), client.CreateSandboxRequest{Profile: "tool-basic"}, "")
			var ae *client.APIError
			return errors.As(err, &ae) && ae.Problem.Code == "service_draining", fmt.Sprint(err)
		})
		if err := svc.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		stopped(t, svc, 20*time.Second)
		if left := sandboxContainers(t, l.SandboxID); len(left) == 0 {
			t.Fatalf("a forced stop destroyed the leased sandbox; it should be left for the next start")
		}
		// The next start adopts it; releasing the lease then ends it.
		svc = e.start(t)
		c = svc.client()
		if sb, err := c.GetSandbox(callCtx(t), l.SandboxID); err != nil || !strings.Contains("leased busy ready", sb.State) {
			t.Fatalf("after the restart the sandbox is %+v (%v), want it adopted", sb, err)
		}
		if err := c.ReleaseLease(callCtx(t), l.LeaseID); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("sigterm with an MCP server", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, cfg)
		e.requireImage(t, "code-python-basic")
		if !strings.Contains(strings.Join(e.runtimes(t), ","), "runsc") {
			t.Fatal("runsc is not available; an ad-hoc MCP server needs it")
		}
		svc := e.start(t)
		script, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(t), "test", "mcpfixture", "server.py"))
		if err != nil {
			t.Fatal(err)
		}
		var s mcpServer
		if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{
			"spec": map[string]any{"command": []string{"python3", "-c", string(script)}, "profile": "code-python-basic"},
		}, &s); code != 201 || s.State != "ready" || !s.OwnLease {
			t.Fatalf("create: %d %s", code, body)
		}
		if err := svc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		// The drain timeout is 60 s; with the server's lease ended first
		// the drain has nothing to wait for.
		took := stopped(t, svc, 45*time.Second)
		t.Logf("SIGTERM with an MCP server: exited after %v", took)
		if left := sandboxContainers(t, s.SandboxID); len(left) != 0 {
			t.Errorf("the MCP server's sandbox is left: %v", left)
		}
	})
}

// TestRootOpensTheConsole: the service's address redirects a browser to
// the console, and a wrong method on an API path is 405 with Allow.
func TestRootOpensTheConsole(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	svc := e.start(t)
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: callTimeout}
	resp, err := hc.Get(svc.url() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/console/" {
		t.Errorf("GET /: %d Location %q, want 302 to /console/", resp.StatusCode, resp.Header.Get("Location"))
	}
	req, _ := http.NewRequestWithContext(context.Background(), "PUT", svc.url()+"/v1/sandboxes", nil)
	req.Header.Set("Authorization", "Bearer "+e.apiKey)
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD, POST" || !strings.Contains(string(b), "method_not_allowed") {
		t.Errorf("PUT /v1/sandboxes: %d Allow %q %s", resp.StatusCode, resp.Header.Get("Allow"), b)
	}
}
