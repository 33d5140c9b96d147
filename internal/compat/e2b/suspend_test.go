package e2b_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/assemble"
	"genesis.dev/sandbox/internal/compat/e2b"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/snapshots"
	"genesis.dev/sandbox/internal/tenant"
)

// fakeSnaps stands for snapshots.Manager over the harness's records: a
// hibernation and a resume are their state changes (the fake driver
// keeps no state), snapshots are records in memory, and sandboxes made
// from them are plain creates.
type fakeSnaps struct {
	h *controltest.Harness

	mu           sync.Mutex
	calls        []string
	hibernateErr error
	failFork     bool
	created      []snapshots.CreateOptions
	snaps        map[string]*sandbox.Snapshot
}

func (f *fakeSnaps) note(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
}

func (f *fakeSnaps) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeSnaps) HibernateWith(ctx context.Context, tenant, id string, o snapshots.HibernateOptions) (*sandbox.Sandbox, error) {
	mem := "nil"
	if o.Memory != nil {
		mem = fmt.Sprint(*o.Memory)
	}
	f.note("hibernate %s memory=%s", id, mem)
	f.mu.Lock()
	err := f.hibernateErr
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if _, err := f.h.Svc.BeginSuspend(ctx, tenant, id, "hibernating"); err != nil {
		return nil, err
	}
	return f.h.Svc.SetSuspended(ctx, id, sandbox.StateHibernated, func(s *sandbox.Suspension) { s.Memory = o.Memory == nil || *o.Memory })
}

func (f *fakeSnaps) Resume(ctx context.Context, tenant, id string) (*sandbox.Sandbox, *bool, error) {
	f.note("resume %s", id)
	sb, err := f.h.Svc.GetSandbox(ctx, tenant, id)
	if err != nil || sb.State.Running() {
		return sb, nil, err
	}
	sb, err = f.h.Svc.EndSuspend(ctx, id)
	return sb, nil, err
}

func (f *fakeSnaps) Snapshot(_ context.Context, tenant, id string, o snapshots.SnapshotOptions) (*sandbox.Snapshot, error) {
	f.note("snapshot %s", id)
	sn := &sandbox.Snapshot{ID: sandbox.NewID("snap"), Tenant: tenant, Name: o.Name, SandboxID: id, State: sandbox.SnapshotReady}
	f.mu.Lock()
	f.snaps[sn.ID] = sn
	f.mu.Unlock()
	return sn, nil
}

func (f *fakeSnaps) make(ctx context.Context, in snapshots.CreateOptions) *snapshots.Made {
	f.mu.Lock()
	f.created = append(f.created, in)
	f.mu.Unlock()
	sb, err := f.h.Svc.CreateSandbox(ctx, control.CreateSandboxInput{Tenant: in.Tenant, Profile: controltest.Profile, TTLSeconds: in.TTLSeconds, Metadata: in.Metadata})
	return &snapshots.Made{Sandbox: sb, Memory: true, Err: err}
}

func (f *fakeSnaps) CreateFrom(ctx context.Context, snapID string, in snapshots.CreateOptions) (*snapshots.Made, error) {
	f.note("create from %s", snapID)
	m := f.make(ctx, in)
	return m, m.Err
}

func (f *fakeSnaps) Fork(ctx context.Context, tenant, id string, count int, in snapshots.CreateOptions) ([]*snapshots.Made, error) {
	f.note("fork %s ×%d", id, count)
	out := make([]*snapshots.Made, count)
	for i := range out {
		if i == 0 && f.failFork {
			out[i] = &snapshots.Made{Err: errdefs.WithCode("capacity_exhausted", errdefs.Mark(fmt.Errorf("no room for a copy"), errdefs.ErrResourceExhausted))}
			continue
		}
		in.Tenant = tenant
		out[i] = f.make(ctx, in)
	}
	return out, nil
}

func (f *fakeSnaps) Get(_ context.Context, tenant, id string) (*sandbox.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sn, ok := f.snaps[id]; ok && sn.Tenant == tenant {
		return sn, nil
	}
	return nil, fmt.Errorf("snapshot %s: %w", id, errdefs.ErrNotFound)
}

func (f *fakeSnaps) List(_ context.Context, tenant, sandboxID string, _ int) ([]*sandbox.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*sandbox.Snapshot
	for _, sn := range f.snaps {
		if sn.Tenant == tenant && (sandboxID == "" || sn.SandboxID == sandboxID) {
			out = append(out, sn)
		}
	}
	return out, nil
}

func (f *fakeSnaps) Delete(_ context.Context, tenant, id string) error {
	f.note("delete %s", id)
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.snaps, id)
	return nil
}

// e2bServer is the adapter (with fakeSnaps unless noSnaps) over a
// harness whose test profile allows leases of up to an hour, reached over
// HTTP with tenant a's key.
type e2bServer struct {
	h     *controltest.Harness
	a     *e2b.Adapter
	snaps *fakeSnaps
	url   string
}

func newE2BServer(t *testing.T, noSnaps bool) *e2bServer {
	t.Helper()
	keyID := tenant.ConfigKeyID(tenant.HashKey("key-a"))
	f := &fakeSnaps{snaps: map[string]*sandbox.Snapshot{}}
	cfg := e2b.Config{Settings: config.E2B{Templates: map[string]string{"base": controltest.Profile}, DefaultTimeoutSeconds: 300}}
	if !noSnaps {
		cfg.Snapshots = f
	}
	var a *e2b.Adapter
	hook := &lateHook{}
	h := controltest.NewOpts(t, controltest.Options{Hooks: []control.Hook{hook}, Assemble: func(c *assemble.Config) {
		c.ConfigKeys = tenant.ConfigKeyIDs(map[string]string{"key-a": "a"}) // the tokens' key is live
	}, Configure: func(c *config.Config) {
		c.E2B.Enabled = false // the stack's own adapter would keep the expired sandboxes first
		for i := range c.Profiles {
			if c.Profiles[i].Name == controltest.Profile {
				c.Profiles[i].Lease.MaxTTLSeconds = 3600
			}
		}
	}})
	f.h = h
	cfg.Control, cfg.KeyLive, cfg.Jobs, cfg.Files = h.Svc, h.Tenancy.KeyLive, h.Jobs, h.Files
	a, err := e2b.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.Bind(e2b.Edge{Authenticate: func(_ context.Context, key string) (tenant.Principal, error) {
		if key == "key-a" {
			return tenant.Principal{Tenant: "a", KeyID: keyID, KeyTenant: "a"}, nil
		}
		return tenant.Principal{}, fmt.Errorf("unknown key: %w", errdefs.ErrUnauthenticated)
	}})
	hook.set(a)
	mux := http.NewServeMux()
	for _, r := range a.Routes() {
		if r.Method != "ANY" {
			mux.HandleFunc(r.Method+" "+r.Pattern, r.Handler)
		}
	}
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	t.Cleanup(a.Close)
	return &e2bServer{h: h, a: a, snaps: f, url: ts.URL + e2b.Prefix}
}

// lateHook passes control's expiry hook to the adapter, which is made
// after the harness (it needs the harness's services) while hooks are
// registered before the service starts.
type lateHook struct {
	mu sync.Mutex
	a  *e2b.Adapter
}

func (l *lateHook) set(a *e2b.Adapter) { l.mu.Lock(); l.a = a; l.mu.Unlock() }
func (l *lateHook) get() *e2b.Adapter  { l.mu.Lock(); defer l.mu.Unlock(); return l.a }
func (l *lateHook) Name() string       { return "e2b" }
func (l *lateHook) KeepExpired(ctx context.Context, sb *sandbox.Sandbox) bool {
	a := l.get()
	return a != nil && a.KeepExpired(ctx, sb)
}
func (l *lateHook) ExpiryKept(ctx context.Context, sb *sandbox.Sandbox) { l.get().ExpiryKept(ctx, sb) }

// call sends a control-plane request and decodes a JSON answer into out.
func (s *e2bServer) call(t *testing.T, method, path, body string, out any) (int, string) {
	t.Helper()
	return s.send(t, method, path, body, map[string]string{"X-API-KEY": "e2b_key-a"}, out)
}

func (s *e2bServer) send(t *testing.T, method, path, body string, headers map[string]string, out any) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode, string(b)
}

// health is the SDK's isRunning: the agent's health through the
// sandbox's traffic route.
func (s *e2bServer) health(t *testing.T, id, token string) int {
	t.Helper()
	code, _ := s.send(t, "GET", "/health", "", map[string]string{"E2b-Sandbox-Id": id, "X-Access-Token": token}, nil)
	return code
}

type createdSandbox struct {
	SandboxID       string `json:"sandboxID"`
	EnvdAccessToken string `json:"envdAccessToken"`
}

type sandboxInfo struct {
	SandboxID string            `json:"sandboxID"`
	State     string            `json:"state"`
	EndAt     time.Time         `json:"endAt"`
	Metadata  map[string]string `json:"metadata"`
	Lifecycle *struct {
		OnTimeout  string `json:"onTimeout"`
		AutoResume bool   `json:"autoResume"`
	} `json:"lifecycle"`
}

func (s *e2bServer) create(t *testing.T, body string) createdSandbox {
	t.Helper()
	var c createdSandbox
	if code, b := s.call(t, "POST", "/v2/sandboxes", body, &c); code != http.StatusCreated {
		t.Fatalf("create %s: %d %s", body, code, b)
	}
	return c
}

func (s *e2bServer) info(t *testing.T, id string) sandboxInfo {
	t.Helper()
	var d sandboxInfo
	if code, b := s.call(t, "GET", "/sandboxes/"+id, "", &d); code != http.StatusOK {
		t.Fatalf("get %s: %d %s", id, code, b)
	}
	return d
}

// listed is the ids the list answers for a state filter ("" for none).
func (s *e2bServer) listed(t *testing.T, state string) map[string]string {
	t.Helper()
	path := "/v2/sandboxes"
	if state != "" {
		path += "?state=" + state
	}
	var list []sandboxInfo
	if code, b := s.call(t, "GET", path, "", &list); code != http.StatusOK {
		t.Fatalf("list %q: %d %s", state, code, b)
	}
	out := map[string]string{}
	for _, d := range list {
		out[d.SandboxID] = d.State
	}
	return out
}

// TestPauseAndConnect: E2B's pause is a hibernation (memory as the SDK
// asks), after which the sandbox reads paused in get and list (filtered
// by state), is kept for the longest lease its profile allows, answers no
// traffic (502, as E2B for a paused sandbox) and refuses a second pause
// (409, the SDK's "already paused"); connect resumes it (201) and it ends
// the connect's timeout later; a second connect finds it running (200).
func TestPauseAndConnect(t *testing.T) {
	t.Parallel()
	s := newE2BServer(t, false)
	c := s.create(t, `{"templateID":"base","timeout":120,"metadata":{"k":"v"}}`)
	other := s.create(t, `{"templateID":"base","timeout":120}`)
	if code, b := s.call(t, "POST", "/sandboxes/"+c.SandboxID+"/pause", `{"memory":false}`, nil); code != http.StatusNoContent {
		t.Fatalf("pause: %d %s", code, b)
	}
	if got := s.snaps.called(); len(got) != 1 || got[0] != "hibernate "+c.SandboxID+" memory=false" {
		t.Errorf("pause called %v, want a hibernation with memory false", got)
	}
	d := s.info(t, c.SandboxID)
	if d.State != "paused" || d.Metadata["k"] != "v" || len(d.Metadata) != 1 || d.Lifecycle == nil || d.Lifecycle.OnTimeout != "kill" || d.Lifecycle.AutoResume {
		t.Errorf("paused sandbox reads %+v", d)
	}
	if left := time.Until(d.EndAt); left < 59*time.Minute {
		t.Errorf("a paused sandbox ends in %v, want about an hour (the profile's longest lease)", left)
	}
	if got := s.listed(t, ""); got[c.SandboxID] != "paused" || got[other.SandboxID] != "running" {
		t.Errorf("list: %v", got)
	}
	if got := s.listed(t, "running"); len(got) != 1 || got[other.SandboxID] != "running" {
		t.Errorf("list state=running: %v", got)
	}
	if got := s.listed(t, "paused"); len(got) != 1 || got[c.SandboxID] != "paused" {
		t.Errorf("list state=paused: %v", got)
	}
	if got := s.listed(t, "running,paused"); len(got) != 2 {
		t.Errorf("list state=running,paused: %v", got)
	}
	if code := s.health(t, c.SandboxID, c.EnvdAccessToken); code != http.StatusBadGateway {
		t.Errorf("traffic to a paused sandbox: %d, want 502", code)
	}
	if code, b := s.call(t, "POST", "/sandboxes/"+c.SandboxID+"/pause", ``, nil); code != http.StatusConflict {
		t.Errorf("pause of a paused sandbox: %d %s, want 409", code, b)
	}
	if code, b := s.call(t, "POST", "/sandboxes/"+c.SandboxID+"/timeout", `{"timeout":60}`, nil); code != http.StatusNotFound {
		t.Errorf("timeout of a paused sandbox: %d %s, want 404", code, b)
	}
	var again createdSandbox
	if code, b := s.call(t, "POST", "/v2/sandboxes/"+c.SandboxID+"/connect", `{"timeout":90}`, &again); code != http.StatusCreated || again.SandboxID != c.SandboxID || again.EnvdAccessToken == "" {
		t.Fatalf("connect to a paused sandbox: %d %s", code, b)
	}
	d = s.info(t, c.SandboxID)
	if left := time.Until(d.EndAt); d.State != "running" || left > 91*time.Second || left < 80*time.Second {
		t.Errorf("after connect: %s, ends in %v; want running, ending in 90 s", d.State, left)
	}
	if s.h.Record(c.SandboxID).Metadata["e2b.paused"] != "" {
		t.Error("the pause mark outlived the resume")
	}
	if code := s.health(t, c.SandboxID, again.EnvdAccessToken); code != http.StatusNoContent {
		t.Errorf("traffic after connect: %d", code)
	}
	if code, b := s.call(t, "POST", "/v2/sandboxes/"+c.SandboxID+"/connect", `{}`, nil); code != http.StatusOK {
		t.Errorf("connect to a running sandbox: %d %s, want 200", code, b)
	}
	// A paused sandbox can be killed.
	if code, _ := s.call(t, "POST", "/sandboxes/"+other.SandboxID+"/pause", ``, nil); code != http.StatusNoContent {
		t.Fatalf("pause: %d", code)
	}
	if code, b := s.call(t, "DELETE", "/sandboxes/"+other.SandboxID, "", nil); code != http.StatusNoContent {
		t.Errorf("kill of a paused sandbox: %d %s", code, b)
	}
	if code, _ := s.call(t, "GET", "/sandboxes/"+other.SandboxID, "", nil); code != http.StatusNotFound {
		t.Errorf("get of a killed paused sandbox: %d", code)
	}
}

// TestConnectMemoryFalse: connect's memory false (onResume 'reboot') is
// refused for a sandbox whose memory was kept — a files-only wake is not
// offered, and E2B never turns it into a memory restore — and the sandbox
// stays paused.
func TestConnectMemoryFalse(t *testing.T) {
	t.Parallel()
	s := newE2BServer(t, false)
	c := s.create(t, `{"templateID":"base","timeout":120}`)
	if code, _ := s.call(t, "POST", "/sandboxes/"+c.SandboxID+"/pause", `{}`, nil); code != http.StatusNoContent {
		t.Fatalf("pause: %d", code)
	}
	if code, b := s.call(t, "POST", "/v2/sandboxes/"+c.SandboxID+"/connect", `{"memory":false}`, nil); code != http.StatusNotImplemented || !strings.Contains(b, `"code":501`) {
		t.Errorf("connect memory false: %d %s, want 501", code, b)
	}
	if d := s.info(t, c.SandboxID); d.State != "paused" {
		t.Errorf("after a refused connect: %s", d.State)
	}
}

// TestAutoPauseAtTimeout: a sandbox created with lifecycle onTimeout
// "pause" (autoPause, autoPauseMemory, autoResume) is hibernated when its
// timeout runs out instead of ending, reads paused with its lifecycle,
// and — autoResume — wakes at its next traffic. One without it ends. One
// whose auto-pause fails ends as its timeout said.
func TestAutoPauseAtTimeout(t *testing.T) {
	t.Parallel()
	s := newE2BServer(t, false)
	ctx := context.Background()
	auto := s.create(t, `{"templateID":"base","timeout":30,"autoPause":true,"autoPauseMemory":true,"autoResume":{"enabled":true}}`)
	plain := s.create(t, `{"templateID":"base","timeout":30}`)
	if d := s.info(t, auto.SandboxID); d.Lifecycle == nil || d.Lifecycle.OnTimeout != "pause" || !d.Lifecycle.AutoResume || len(d.Metadata) != 0 {
		t.Errorf("lifecycle of an auto-pausing sandbox: %+v", d)
	}
	s.h.Clock.Advance(31 * time.Second)
	if err := s.h.Svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	s.a.Close() // the auto-pause ran
	if got := s.snaps.called(); len(got) != 1 || got[0] != "hibernate "+auto.SandboxID+" memory=true" {
		t.Errorf("at the timeout: %v, want one hibernation keeping memory", got)
	}
	if d := s.info(t, auto.SandboxID); d.State != "paused" || time.Until(d.EndAt) < 50*time.Minute {
		t.Errorf("auto-paused sandbox: %+v", d)
	}
	if code, _ := s.call(t, "GET", "/sandboxes/"+plain.SandboxID, "", nil); code != http.StatusNotFound {
		t.Errorf("a sandbox without auto-pause after its timeout: %d, want 404", code)
	}
	// autoResume: traffic wakes it.
	if code := s.health(t, auto.SandboxID, auto.EnvdAccessToken); code != http.StatusNoContent {
		t.Errorf("traffic to an auto-resuming paused sandbox: %d, want 204", code)
	}
	if d := s.info(t, auto.SandboxID); d.State != "running" || d.EndAt.Sub(s.h.Clock.Now()) > 301*time.Second || d.EndAt.Sub(s.h.Clock.Now()) < 280*time.Second {
		t.Errorf("after its traffic: %s, ends at %v; want running, ending after the default timeout (300 s) from now %v", d.State, d.EndAt, s.h.Clock.Now())
	}

	s2 := newE2BServer(t, false)
	s2.snaps.hibernateErr = errdefs.WithCode("not_supported", errdefs.Mark(fmt.Errorf("no pause here"), errdefs.ErrNotImplemented))
	doomed := s2.create(t, `{"templateID":"base","timeout":30,"autoPause":true}`)
	s2.h.Clock.Advance(31 * time.Second)
	if err := s2.h.Svc.Reconcile(ctx, false); err != nil {
		t.Fatal(err)
	}
	s2.a.Close()
	if st := s2.h.Record(doomed.SandboxID).State; st != sandbox.StateDestroyed {
		t.Errorf("a sandbox whose auto-pause failed is %s, want destroyed", st)
	}
}

// TestTrafficWakesHibernated: a sandbox the service hibernated by itself
// (not paused through E2B) wakes at its next traffic, as everywhere in the
// service.
func TestTrafficWakesHibernated(t *testing.T) {
	t.Parallel()
	s := newE2BServer(t, false)
	c := s.create(t, `{"templateID":"base","timeout":120}`)
	if _, err := s.snaps.HibernateWith(context.Background(), "a", c.SandboxID, snapshots.HibernateOptions{}); err != nil {
		t.Fatal(err)
	}
	if code := s.health(t, c.SandboxID, c.EnvdAccessToken); code != http.StatusNoContent {
		t.Errorf("traffic to a hibernated sandbox: %d, want 204", code)
	}
	if st := s.h.Record(c.SandboxID).State; !st.Running() {
		t.Errorf("after its traffic: %s", st)
	}
}

// TestSnapshotsAndFork: createSnapshot answers E2B's SnapshotInfo; the
// snapshot lists (by sandbox and name), creates a sandbox by id or name
// as a template (with the create's timeout and metadata) and is deleted
// through DELETE /templates/{id}; fork answers one result per copy, a
// sandbox or an error.
func TestSnapshotsAndFork(t *testing.T) {
	t.Parallel()
	s := newE2BServer(t, false)
	c := s.create(t, `{"templateID":"base","timeout":120,"metadata":{"k":"v"}}`)
	var info struct {
		SnapshotID string   `json:"snapshotID"`
		Names      []string `json:"names"`
	}
	if code, b := s.call(t, "POST", "/sandboxes/"+c.SandboxID+"/snapshots", `{"name":"warm-base"}`, &info); code != http.StatusCreated ||
		!strings.HasPrefix(info.SnapshotID, "snap_") || len(info.Names) != 1 || info.Names[0] != "warm-base" {
		t.Fatalf("createSnapshot: %d %s", code, b)
	}
	var list []struct {
		SnapshotID string `json:"snapshotID"`
	}
	if code, b := s.call(t, "GET", "/snapshots?sandboxID="+c.SandboxID, "", &list); code != http.StatusOK || len(list) != 1 || list[0].SnapshotID != info.SnapshotID {
		t.Errorf("listSnapshots: %d %s", code, b)
	}
	if code, b := s.call(t, "GET", "/snapshots?name=other", "", &list); code != http.StatusOK || len(list) != 0 {
		t.Errorf("listSnapshots by another name: %d %s", code, b)
	}
	for _, ref := range []string{info.SnapshotID, "warm-base"} {
		made := s.create(t, `{"templateID":"`+ref+`","timeout":77,"metadata":{"from":"snap"}}`)
		if d := s.info(t, made.SandboxID); d.State != "running" || d.Metadata["from"] != "snap" {
			t.Errorf("a sandbox from snapshot %s: %+v", ref, d)
		}
	}
	s.snaps.mu.Lock()
	in := s.snaps.created[0]
	s.snaps.mu.Unlock()
	if in.TTLSeconds != 77 || in.Tenant != "a" || in.Metadata["e2b.template"] != info.SnapshotID {
		t.Errorf("create from a snapshot asked %+v", in)
	}
	if code, b := s.call(t, "DELETE", "/templates/"+info.SnapshotID, "", nil); code != http.StatusNoContent {
		t.Errorf("deleteSnapshot: %d %s", code, b)
	}
	if code, _ := s.call(t, "DELETE", "/templates/"+info.SnapshotID, "", nil); code != http.StatusNotFound {
		t.Errorf("deleteSnapshot again: %d, want 404 (the SDK's false)", code)
	}
	if code, b := s.call(t, "POST", "/v2/sandboxes", `{"templateID":"`+info.SnapshotID+`"}`, nil); code != http.StatusBadRequest {
		t.Errorf("create from a deleted snapshot: %d %s, want 400", code, b)
	}

	s.snaps.failFork = true
	var forks []struct {
		Sandbox *createdSandbox `json:"sandbox"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if code, b := s.call(t, "POST", "/sandboxes/"+c.SandboxID+"/fork", `{"count":2,"timeout":60}`, &forks); code != http.StatusCreated || len(forks) != 2 {
		t.Fatalf("fork: %d %s", code, b)
	}
	if forks[0].Error == nil || forks[0].Error.Code != http.StatusServiceUnavailable && forks[0].Error.Code != http.StatusTooManyRequests || forks[0].Sandbox != nil {
		t.Errorf("a failed copy: %+v", forks[0])
	}
	if forks[1].Sandbox == nil || forks[1].Sandbox.EnvdAccessToken == "" || forks[1].Error != nil {
		t.Fatalf("a copy: %+v", forks[1])
	}
	if d := s.info(t, forks[1].Sandbox.SandboxID); d.Metadata["k"] != "v" || time.Until(d.EndAt) > 61*time.Second {
		t.Errorf("a fork: %+v, want the parent's metadata and the fork's timeout", d)
	}
}

// TestWithoutSnapshots: a service without snapshot support answers pause,
// fork, snapshots and an auto-pausing create 501; the list of snapshots
// is empty.
func TestWithoutSnapshots(t *testing.T) {
	t.Parallel()
	s := newE2BServer(t, true)
	c := s.create(t, `{"templateID":"base","timeout":120}`)
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/sandboxes/" + c.SandboxID + "/pause", ``},
		{"POST", "/sandboxes/" + c.SandboxID + "/fork", `{"count":1}`},
		{"POST", "/sandboxes/" + c.SandboxID + "/snapshots", `{}`},
		{"POST", "/v2/sandboxes", `{"templateID":"base","autoPause":true}`},
	} {
		if code, b := s.call(t, r.method, r.path, r.body, nil); code != http.StatusNotImplemented || !strings.Contains(b, `"code":501`) {
			t.Errorf("%s %s: %d %s, want 501", r.method, r.path, code, b)
		}
	}
	if code, b := s.call(t, "GET", "/snapshots", "", nil); code != http.StatusOK || strings.TrimSpace(b) != "[]" {
		t.Errorf("listSnapshots: %d %s", code, b)
	}
	if d := s.info(t, c.SandboxID); d.State != "running" {
		t.Errorf("the sandbox after the refused calls: %s", d.State)
	}
}

// TestTrafficWaitsForOperation: traffic that reaches a sandbox while an
// operation is under way on it (here the hibernation of an auto-pause with
// autoResume) waits for it to end, and then wakes the sandbox; without
// autoResume it then answers 502 (paused).
func TestTrafficWaitsForOperation(t *testing.T) {
	t.Parallel()
	s := newE2BServer(t, false)
	ctx := context.Background()
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"templateID":"base","timeout":120,"autoPause":true,"autoResume":{"enabled":true}}`, http.StatusNoContent},
		{`{"templateID":"base","timeout":120,"autoPause":true}`, http.StatusBadGateway},
	} {
		c := s.create(t, tc.body)
		on := "true"
		if _, err := s.h.Svc.PatchSandbox(ctx, "a", c.SandboxID, 0, map[string]*string{"e2b.paused": &on}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.h.Svc.BeginSuspend(ctx, "a", c.SandboxID, "hibernating"); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			time.Sleep(300 * time.Millisecond)
			_, err := s.h.Svc.SetSuspended(ctx, c.SandboxID, sandbox.StateHibernated, func(x *sandbox.Suspension) { x.Memory = true })
			done <- err
		}()
		if code := s.health(t, c.SandboxID, c.EnvdAccessToken); code != tc.want {
			t.Errorf("%s: traffic during the hibernation: %d, want %d", tc.body, code, tc.want)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
