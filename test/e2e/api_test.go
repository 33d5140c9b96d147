package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/driver"
)

// TestBadInput sends wrong requests over real HTTP and checks each gets its
// status and problem code, and that none of them leaves a container.
func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	ours := []string{"label=" + driver.LabelManaged + "=true", "label=" + driver.LabelInstance + "=" + e.instance()}
	before := containers(t, ours...)

	t.Run("runtimes", func(t *testing.T) {
		for _, rt := range e.runtimes(t) {
			t.Run(rt, func(t *testing.T) {
				t.Parallel()
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				defer cancel()

				_, err := c.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "no-such-profile", Runtime: rt}, "")
				wantAPIError(t, "unknown profile", err, http.StatusNotFound, "profile_not_found")

				untrusted := client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt, RiskLevel: "untrusted"}
				sb, err := c.CreateSandbox(ctx, untrusted, "")
				switch rt {
				case "runc":
					wantAPIError(t, "runc for untrusted code", err, http.StatusBadRequest, "runtime_not_allowed")
				default:
					// The control case: the same request under a stronger runtime is fine.
					if err != nil {
						t.Fatalf("untrusted under %s: %v", rt, err)
					}
					if sb.Runtime != rt || sb.RiskLevel != "untrusted" || sb.State != "ready" {
						t.Errorf("untrusted under %s: got runtime %s risk %s state %s", rt, sb.Runtime, sb.RiskLevel, sb.State)
					}
					if err := c.DeleteSandbox(ctx, sb.ID); err != nil {
						t.Fatalf("delete %s: %v", sb.ID, err)
					}
				}

				body, _ := json.Marshal(client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt})
				status, p, hdr := rawPost(t, svc.url()+"/v1/sandboxes", "", body)
				if status != http.StatusUnauthorized || p.Code != "unauthenticated" || hdr.Get("WWW-Authenticate") == "" {
					t.Errorf("no API key: got %d %q (WWW-Authenticate %q), want 401 unauthenticated with a challenge", status, p.Code, hdr.Get("WWW-Authenticate"))
				}
				status, p, _ = rawPost(t, svc.url()+"/v1/sandboxes", "wrong-key-0123456789", body)
				if status != http.StatusUnauthorized || p.Code != "unauthenticated" {
					t.Errorf("wrong API key: got %d %q, want 401 unauthenticated", status, p.Code)
				}

				big, _ := json.Marshal(client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt,
					Metadata: map[string]string{"pad": strings.Repeat("x", 2<<20)}})
				status, p, _ = rawPost(t, svc.url()+"/v1/sandboxes", e.apiKey, big)
				if status != http.StatusRequestEntityTooLarge || p.Code != "too_large" {
					t.Errorf("2 MiB body: got %d %q, want 413 too_large", status, p.Code)
				}
			})
		}
	})

	if after := containers(t, ours...); !slices.Equal(before, after) {
		t.Errorf("containers of this service before the bad requests %v, after %v", before, after)
	}
}

// wantAPIError fails t unless err is an API error with status and code.
func wantAPIError(t *testing.T, what string, err error, status int, code string) {
	t.Helper()
	var ae *client.APIError
	if !errors.As(err, &ae) {
		t.Errorf("%s: got %v, want %d %s", what, err, status, code)
		return
	}
	if ae.Status != status || ae.Problem.Code != code {
		t.Errorf("%s: got %d %s (%s), want %d %s", what, ae.Status, ae.Problem.Code, ae.Message(), status, code)
	}
}

// rawPost posts body as JSON with an optional Bearer key and decodes the
// problem+json answer; it fails t when the answer is not problem+json.
func rawPost(t *testing.T, url, key string, body []byte) (int, client.Problem, http.Header) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var p client.Problem
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "application/problem+json" || json.Unmarshal(b, &p) != nil {
		t.Errorf("POST %s: %d answer is %q, not problem+json: %q", url, resp.StatusCode, mt, b)
	}
	return resp.StatusCode, p, resp.Header
}

// TestTTL checks that the reconciler destroys a sandbox once its TTL has
// passed and removes its container.
func TestTTL(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "intervals: {reconcile: 1s}\n")
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()

	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt, TTLSeconds: 2})
			if sb.ExpiresAt == nil || sb.ExpiresAt.Sub(sb.CreatedAt) != 2*time.Second {
				t.Errorf("expires_at %v for created_at %v, want 2 s later", sb.ExpiresAt, sb.CreatedAt)
			}
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			var got *client.Sandbox
			eventually(t, 15*time.Second, "sandbox destroyed after its 2 s TTL", func() (bool, string) {
				var err error
				if got, err = c.GetSandbox(ctx, sb.ID); err != nil {
					return false, err.Error()
				}
				return got.State == "destroyed", got.State
			})
			if !strings.Contains(got.FailureReason, "ttl") {
				t.Errorf("destroyed sandbox says %q, want the TTL as its reason", got.FailureReason)
			}
			if left := sandboxContainers(t, sb.ID); len(left) != 0 {
				t.Errorf("expired sandbox %s still has containers %v", sb.ID, left)
			}
		})
	}
}

// TestPython runs Python in code-python-basic sandboxes: under runsc at the
// profile's default risk level, and under runc for low-risk code.
func TestPython(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "code-python-basic")
	svc := e.start(t)
	c := svc.client()

	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			req := client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt}
			if rt == "runc" {
				req.RiskLevel = "low" // the profile's default, medium, needs runsc
			}
			sb := e.createSandbox(t, req)
			ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
			defer cancel()
			res, err := c.Exec(ctx, sb.ID, client.ExecRequest{Command: []string{"python3", "-c", "print(6*7)"}})
			if err != nil {
				t.Fatalf("exec: %v", err)
			}
			if res.ExitCode != 0 || res.Stdout != "42\n" {
				t.Errorf("python3 -c 'print(6*7)' under %s: exit %d stdout %q stderr %q, want 42", rt, res.ExitCode, res.Stdout, res.Stderr)
			}
		})
	}
}
