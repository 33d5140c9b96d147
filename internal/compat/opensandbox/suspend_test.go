package opensandbox_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/assemble"
	"genesis.dev/sandbox/internal/compat/opensandbox"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/tenant"
)

// fakeSnaps stands for snapshots.Manager over the harness's records: a
// pause and a resume are their state changes (the fake driver keeps no
// state).
type fakeSnaps struct {
	h *controltest.Harness

	mu    sync.Mutex
	calls []string
}

func (f *fakeSnaps) note(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *fakeSnaps) called() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.calls, ", ")
}

func (f *fakeSnaps) Pause(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error) {
	f.note("pause")
	sb, err := f.h.Svc.GetSandbox(ctx, tenant, id)
	if err != nil || sb.State == sandbox.StatePaused {
		return sb, err
	}
	if _, err := f.h.Svc.BeginSuspend(ctx, tenant, id, "pausing"); err != nil {
		return nil, err
	}
	return f.h.Svc.SetSuspended(ctx, id, sandbox.StatePaused, nil)
}

func (f *fakeSnaps) Resume(ctx context.Context, tenant, id string) (*sandbox.Sandbox, *bool, error) {
	f.note("resume")
	sb, err := f.h.Svc.GetSandbox(ctx, tenant, id)
	if err != nil || sb.State.Running() {
		return sb, nil, err
	}
	sb, err = f.h.Svc.EndSuspend(ctx, id)
	return sb, nil, err
}

// hibernate puts a sandbox of tenant a in the state a hibernation leaves.
func (f *fakeSnaps) hibernate(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	if _, err := f.h.Svc.BeginSuspend(ctx, "a", id, "hibernating"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.h.Svc.SetSuspended(ctx, id, sandbox.StateHibernated, func(s *sandbox.Suspension) { s.Memory = true }); err != nil {
		t.Fatal(err)
	}
}

// suspendServer is the adapter with fakeSnaps (none when noSnaps) over a
// harness, reached over HTTP with tenant a's key.
type suspendServer struct {
	server
	snaps *fakeSnaps
	root  string
}

func newSuspendServer(t *testing.T, noSnaps bool) *suspendServer {
	t.Helper()
	h := controltest.NewOpts(t, controltest.Options{Assemble: func(c *assemble.Config) {
		c.ConfigKeys = tenant.ConfigKeyIDs(map[string]string{"key-a": "a"}) // the execd tokens' key is live
	}})
	f := &fakeSnaps{h: h}
	cfg := opensandbox.Config{Control: h.Svc, KeyLive: h.Tenancy.KeyLive, Jobs: h.Jobs, Files: h.Files,
		Settings: config.OpenSandbox{Images: map[string]string{"ubuntu": controltest.Profile}}}
	if !noSnaps {
		cfg.Snapshots = f
	}
	a, err := opensandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.Bind(opensandbox.Edge{Authenticate: func(_ context.Context, key string) (tenant.Principal, error) {
		if key == "key-a" {
			return tenant.Principal{Tenant: "a", KeyID: tenant.ConfigKeyID(tenant.HashKey("key-a")), KeyTenant: "a"}, nil
		}
		return tenant.Principal{}, fmt.Errorf("unknown key: %w", errdefs.ErrUnauthenticated)
	}})
	mux := http.NewServeMux()
	for _, r := range a.Routes() {
		mux.HandleFunc(r.Method+" "+r.Pattern, r.Handler)
	}
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return &suspendServer{server: server{h: h, url: ts.URL + opensandbox.Prefix + "/v1"}, snaps: f, root: ts.URL}
}

func (s *suspendServer) create(t *testing.T) string {
	t.Helper()
	var created sandboxInfo
	if code := s.call(t, "POST", "/sandboxes", `{"image":{"uri":"ubuntu"},"timeout":300,"entrypoint":["x"]}`, &created); code != http.StatusAccepted {
		t.Fatalf("create: %d", code)
	}
	return created.ID
}

func (s *suspendServer) state(t *testing.T, id string) string {
	t.Helper()
	var got sandboxInfo
	if code := s.call(t, "GET", "/sandboxes/"+id, "", &got); code != http.StatusOK {
		t.Fatalf("get %s: %d", id, code)
	}
	return got.Status.State
}

// listed is the sandboxes the list answers for a state filter.
func (s *suspendServer) listed(t *testing.T, query string) map[string]string {
	t.Helper()
	var list struct {
		Items []sandboxInfo `json:"items"`
	}
	if code := s.call(t, "GET", "/sandboxes"+query, "", &list); code != http.StatusOK {
		t.Fatalf("list %s: %d", query, code)
	}
	out := map[string]string{}
	for _, it := range list.Items {
		out[it.ID] = it.Status.State
	}
	return out
}

// ping is the SDK's health check through the execd endpoint the
// lifecycle API answers.
func (s *suspendServer) ping(t *testing.T, id string) int {
	t.Helper()
	var ep struct {
		Endpoint string            `json:"endpoint"`
		Headers  map[string]string `json:"headers"`
	}
	if code := s.call(t, "GET", "/sandboxes/"+id+"/endpoints/44772", "", &ep); code != http.StatusOK {
		return code
	}
	req, _ := http.NewRequest("GET", s.root+opensandbox.Prefix+"/sandboxes/"+id+"/execd/ping", nil)
	for k, v := range ep.Headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestPauseResume: pause is the service's pause (202, then Paused in get
// and in the list filtered by state), a second pause succeeds, execd is
// closed while paused (409), and the sandbox can still be renewed; resume
// thaws it (202, Running, execd answers), and a second resume succeeds.
// A paused sandbox can be deleted.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	s := newSuspendServer(t, false)
	id, other := s.create(t), s.create(t)
	for i := 0; i < 2; i++ {
		if code := s.call(t, "POST", "/sandboxes/"+id+"/pause", "", nil); code != http.StatusAccepted {
			t.Fatalf("pause #%d: %d", i+1, code)
		}
	}
	if got := s.snaps.called(); got != "pause, pause" {
		t.Errorf("pauses called %q", got)
	}
	if st := s.state(t, id); st != "Paused" {
		t.Errorf("paused sandbox reads %s", st)
	}
	if got := s.listed(t, "?state=Paused"); len(got) != 1 || got[id] != "Paused" {
		t.Errorf("list state=Paused: %v", got)
	}
	if got := s.listed(t, "?state=Running&state=Paused"); len(got) != 2 || got[other] != "Running" {
		t.Errorf("list state=Running&state=Paused: %v", got)
	}
	if got := s.listed(t, ""); len(got) != 2 {
		t.Errorf("list: %v", got)
	}
	if code := s.ping(t, id); code != http.StatusConflict {
		t.Errorf("execd of a paused sandbox: %d, want 409 SANDBOX_PAUSED", code)
	}
	at := time.Now().Add(20 * time.Minute).UTC().Format(time.RFC3339)
	if code := s.call(t, "POST", "/sandboxes/"+id+"/renew-expiration", `{"expiresAt":"`+at+`"}`, nil); code != http.StatusOK {
		t.Errorf("renew of a paused sandbox: %d", code)
	}
	for i := 0; i < 2; i++ {
		if code := s.call(t, "POST", "/sandboxes/"+id+"/resume", "", nil); code != http.StatusAccepted {
			t.Fatalf("resume #%d: %d", i+1, code)
		}
	}
	if st := s.state(t, id); st != "Running" {
		t.Errorf("resumed sandbox reads %s", st)
	}
	if code := s.ping(t, id); code != http.StatusOK {
		t.Errorf("execd after resume: %d", code)
	}
	if code := s.call(t, "POST", "/sandboxes/"+other+"/pause", "", nil); code != http.StatusAccepted {
		t.Fatalf("pause: %d", code)
	}
	if code := s.call(t, "DELETE", "/sandboxes/"+other, "", nil); code != http.StatusNoContent {
		t.Errorf("delete of a paused sandbox: %d", code)
	}
	if st := s.state(t, other); st != "Terminated" {
		t.Errorf("deleted paused sandbox reads %s", st)
	}
	for _, path := range []string{"/pause", "/resume"} {
		var e struct{ Code string }
		if code := s.call(t, "POST", "/sandboxes/"+other+path, "", &e); code != http.StatusNotFound {
			t.Errorf("%s of a deleted sandbox: %d %+v", path, code, e)
		}
		if code := s.call(t, "POST", "/sandboxes/sbx_00000000000000000000"+path, "", nil); code != http.StatusNotFound {
			t.Errorf("%s of a missing sandbox: %d", path, code)
		}
	}
}

// TestHibernatedWakes: a sandbox the service hibernated reads Paused; its
// pause succeeds without a call (it holds less than a paused one), and
// its first execd call wakes it, as everywhere in the service.
func TestHibernatedWakes(t *testing.T) {
	t.Parallel()
	s := newSuspendServer(t, false)
	id := s.create(t)
	s.snaps.hibernate(t, id)
	if st := s.state(t, id); st != "Paused" {
		t.Errorf("hibernated sandbox reads %s", st)
	}
	if code := s.call(t, "POST", "/sandboxes/"+id+"/pause", "", nil); code != http.StatusAccepted || s.snaps.called() != "" {
		t.Errorf("pause of a hibernated sandbox: %d, calls %q", code, s.snaps.called())
	}
	if code := s.ping(t, id); code != http.StatusOK {
		t.Errorf("execd of a hibernated sandbox: %d, want it woken", code)
	}
	if st := s.state(t, id); st != "Running" || s.snaps.called() != "resume" {
		t.Errorf("after its execd call: %s, calls %q", st, s.snaps.called())
	}
}

// TestPauseWithoutSnapshots: without snapshot support pause and resume
// are 501 and change nothing.
func TestPauseWithoutSnapshots(t *testing.T) {
	t.Parallel()
	s := newSuspendServer(t, true)
	id := s.create(t)
	for _, path := range []string{"/pause", "/resume"} {
		var e struct{ Code string }
		if code := s.call(t, "POST", "/sandboxes/"+id+path, "", &e); code != http.StatusNotImplemented || e.Code != "NOT_SUPPORTED" {
			t.Errorf("%s: %d %+v", path, code, e)
		}
	}
	if st := s.state(t, id); st != "Running" {
		t.Errorf("after the refused calls: %s", st)
	}
}
