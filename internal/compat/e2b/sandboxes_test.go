package e2b_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/compat/e2b"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/tenant"
)

type detail struct {
	SandboxID string    `json:"sandboxID"`
	StartedAt time.Time `json:"startedAt"`
}

// TestStartedAtIsTheCreate: a sandbox handed out warm from a pool
// answers startedAt = the time of the SDK's create (its lease) in get and
// list, not the hour-older birth of the pool member; a sandbox made
// through /v1 without a lease answers its own creation.
func TestStartedAtIsTheCreate(t *testing.T) {
	t.Parallel()
	h := controltest.New(t, func(c *config.Config) {
		c.WarmPools = true
		c.Intervals.PoolCheck = time.Hour
		for i := range c.Profiles {
			if c.Profiles[i].Name == controltest.Profile {
				c.Profiles[i].Pools = []config.PoolSpec{{Runtime: sandbox.RuntimeRunc, MinIdle: 1, MaxTotal: 3}}
			}
		}
	})
	a, err := e2b.New(e2b.Config{Control: h.Svc, Jobs: h.Jobs, Files: h.Files,
		Settings: config.E2B{Templates: map[string]string{"base": controltest.Profile}}})
	if err != nil {
		t.Fatal(err)
	}
	a.Bind(e2b.Edge{Authenticate: func(_ context.Context, key string) (tenant.Principal, error) {
		if key == "key-a" {
			return tenant.Principal{Tenant: "a", KeyID: "key_a"}, nil
		}
		return tenant.Principal{}, fmt.Errorf("unknown key: %w", errdefs.ErrUnauthenticated)
	}})
	mux := http.NewServeMux()
	for _, r := range a.Routes() {
		if r.Method != "ANY" {
			mux.HandleFunc(r.Method+" "+r.Pattern, r.Handler)
		}
	}
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	call := func(method, path, body string, out any) int {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+e2b.Prefix+path, strings.NewReader(body))
		req.Header.Set("X-API-KEY", "e2b_key-a")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
			}
		}
		return resp.StatusCode
	}

	var member *sandbox.Sandbox
	deadline := time.Now().Add(30 * time.Second)
	for member == nil {
		for _, sb := range h.Records() {
			if sb.State == sandbox.StateIdle && sb.Tenant == "" {
				member = sb
			}
		}
		if member == nil && time.Now().After(deadline) {
			t.Fatal("the pool never held an idle member")
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.Clock.Advance(time.Hour)
	before := h.Clock.Now()
	var created struct {
		SandboxID string `json:"sandboxID"`
	}
	if code := call("POST", "/sandboxes", `{"templateID":"base","timeout":120}`, &created); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	after := h.Clock.Now()
	if created.SandboxID != member.ID {
		t.Fatalf("create made %s, not the warm member %s", created.SandboxID, member.ID)
	}
	check := func(what string, got time.Time) {
		t.Helper()
		if got.Before(before) || got.After(after) {
			t.Errorf("%s: startedAt %v, want the create's time in [%v, %v] (the member was made at %v)", what, got, before, after, member.CreatedAt)
		}
	}
	var got detail
	if code := call("GET", "/sandboxes/"+member.ID, "", &got); code != http.StatusOK {
		t.Fatalf("get: %d", code)
	}
	check("get", got.StartedAt)

	plain := h.Create("a", control.CreateSandboxInput{Runtime: "runc"})
	var list []detail
	if code := call("GET", "/sandboxes", "", &list); code != http.StatusOK || len(list) != 2 {
		t.Fatalf("list: %d %+v", code, list)
	}
	for _, d := range list {
		switch d.SandboxID {
		case member.ID:
			check("list", d.StartedAt)
		case plain.ID:
			if !d.StartedAt.Equal(plain.CreatedAt) {
				t.Errorf("a sandbox without a lease: startedAt %v, want its creation %v", d.StartedAt, plain.CreatedAt)
			}
		default:
			t.Errorf("list shows %s", d.SandboxID)
		}
	}
}
