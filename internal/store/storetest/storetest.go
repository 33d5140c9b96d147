package storetest

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// Run runs the conformance suite against the store implementation that open
// makes. Each subtest calls open once and needs a new, empty store; Run
// closes that store when the subtest ends (before cleanups that open
// registered run).
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		run  func(t *testing.T, s store.Store)
	}{
		{"Ping", testPing},
		{"SandboxRoundTrip", testSandboxRoundTrip},
		{"SandboxDuplicateID", testSandboxDuplicateID},
		{"TenantIsolation", testTenantIsolation},
		{"ListSandboxesFilters", testListSandboxesFilters},
		{"CountSandboxesByState", testCountSandboxesByState},
		{"UpdateSandbox", testUpdateSandbox},
		{"UpdateSandboxFnErrorAborts", testUpdateSandboxFnError},
		{"UpdateSandboxKeepsIdentity", testUpdateSandboxKeepsIdentity},
		{"ConcurrentUpdateSandbox", testConcurrentUpdateSandbox},
		{"ConcurrentIfMatchUpdateSandbox", testConcurrentIfMatchUpdateSandbox},
		{"JobRoundTrip", testJobRoundTrip},
		{"JobDuplicateID", testJobDuplicateID},
		{"UpdateJobLifecycle", testUpdateJobLifecycle},
		{"UpdateJobFnErrorAborts", testUpdateJobFnError},
		{"UpdateJobKeepsIdentity", testUpdateJobKeepsIdentity},
		{"FinishJob", testFinishJob},
		{"ConcurrentUpdateJob", testConcurrentUpdateJob},
		{"ListJobsFilters", testListJobsFilters},
		{"NotFound", testNotFound},
		{"Sessions", testSessions},
		{"Tenants", testTenants},
		{"Keys", testKeys},
		{"Audit", testAudit},
		{"Networks", testNetworks},
		{"Artifacts", testArtifacts},
		{"ClaimFromPool", testClaimFromPool},
		{"ClaimFromAnyInstance", testClaimFromAnyInstance},
		{"ClaimSandboxByID", testClaimSandboxByID},
		{"ClaimWithAudit", testClaimWithAudit},
		{"OneActiveLeasePerSandbox", testOneActiveLeasePerSandbox},
		{"ListLeases", testListLeases},
		{"ConcurrentClaims", testConcurrentClaims},
		{"ClaimHandsOverNetwork", testClaimHandsOverNetwork},
		{"LeaseHolds", testLeaseHolds},
		{"SandboxSessions", testSandboxSessions},
		{"EndLease", testEndLease},
		{"ReturnSandbox", testReturnSandbox},
		{"ReturnSandboxReady", testReturnSandboxReady},
		{"ReservedSandbox", testReservedSandbox},
		{"Skills", testSkills},
		{"MCPCatalog", testMCPCatalog},
		{"Snapshots", testSnapshots},
		{"Volumes", testVolumes},
		{"ConcurrentVolumeMounts", testConcurrentVolumeMounts},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.run(t, s)
		})
	}
}

// base is a fixed instant with a full nanosecond part.
var base = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)

// Zones used to check that stored times come back as the same instant in UTC.
var (
	east = time.FixedZone("UTC+10", 10*3600)
	west = time.FixedZone("UTC-10", -10*3600)
)

// newSandbox returns a small valid sandbox record.
func newSandbox(id, tenant string, created time.Time) *sandbox.Sandbox {
	return &sandbox.Sandbox{
		ID:        id,
		Tenant:    tenant,
		Profile:   "code-python-basic",
		Runtime:   sandbox.RuntimeRunc,
		RiskLevel: sandbox.RiskLow,
		State:     sandbox.StateReady,
		Image:     "genesis/code-python-basic:1",
		Resources: sandbox.Resources{CPU: 1, MemoryMB: 256, Pids: 64},
		CreatedAt: created,
		UpdatedAt: created,
	}
}

// newJob returns a small valid pending job record.
func newJob(id, tenant, sandboxID string, created time.Time) *sandbox.Job {
	return &sandbox.Job{
		ID:        id,
		Tenant:    tenant,
		SandboxID: sandboxID,
		Command:   []string{"true"},
		State:     sandbox.JobPending,
		CreatedAt: created,
	}
}

func ptr[T any](v T) *T { return &v }

func mustCreateSandbox(t *testing.T, s store.Store, sb *sandbox.Sandbox) {
	t.Helper()
	if err := s.CreateSandbox(t.Context(), sb); err != nil {
		t.Fatalf("CreateSandbox(%s): %v", sb.ID, err)
	}
}

func mustCreateJob(t *testing.T, s store.Store, j *sandbox.Job) {
	t.Helper()
	if err := s.CreateJob(t.Context(), j); err != nil {
		t.Fatalf("CreateJob(%s): %v", j.ID, err)
	}
}

func mustGetSandbox(t *testing.T, s store.Store, tenant, id string) *sandbox.Sandbox {
	t.Helper()
	sb, err := s.GetSandbox(t.Context(), tenant, id)
	if err != nil {
		t.Fatalf("GetSandbox(%q, %s): %v", tenant, id, err)
	}
	return sb
}

func mustGetJob(t *testing.T, s store.Store, tenant, id string) *sandbox.Job {
	t.Helper()
	j, err := s.GetJob(t.Context(), tenant, id)
	if err != nil {
		t.Fatalf("GetJob(%q, %s): %v", tenant, id, err)
	}
	return j
}

func wantClass(t *testing.T, what string, err, class error) {
	t.Helper()
	if !errors.Is(err, class) {
		t.Errorf("%s: error = %v, want class %v", what, err, class)
	}
}

// differ collects field differences between a stored record and the expected one.
type differ []string

func (d *differ) eq(field string, got, want any) {
	if !reflect.DeepEqual(got, want) {
		*d = append(*d, fmt.Sprintf("%s = %#v, want %#v", field, got, want))
	}
}

// time requires the same instant, in UTC.
func (d *differ) time(field string, got, want time.Time) {
	if !got.Equal(want) || got.Location() != time.UTC {
		*d = append(*d, fmt.Sprintf("%s = %s (%v), want %s in UTC", field, got.Format(time.RFC3339Nano), got.Location(), want.UTC().Format(time.RFC3339Nano)))
	}
}

func (d *differ) optTime(field string, got, want *time.Time) {
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil:
		*d = append(*d, fmt.Sprintf("%s = %v, want %v", field, got, want))
	default:
		d.time(field, *got, *want)
	}
}

// strMap treats nil and empty maps alike.
func (d *differ) strMap(field string, got, want map[string]string) {
	if len(got) != len(want) || !maps.Equal(got, want) {
		*d = append(*d, fmt.Sprintf("%s = %v, want %v", field, got, want))
	}
}

func (d differ) report(t *testing.T, what string) {
	t.Helper()
	for _, line := range d {
		t.Errorf("%s: %s", what, line)
	}
}

func checkSandbox(t *testing.T, what string, got, want *sandbox.Sandbox) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: nil sandbox", what)
	}
	var d differ
	d.eq("ID", got.ID, want.ID)
	d.eq("Tenant", got.Tenant, want.Tenant)
	d.eq("Profile", got.Profile, want.Profile)
	d.eq("Runtime", got.Runtime, want.Runtime)
	d.eq("RiskLevel", got.RiskLevel, want.RiskLevel)
	d.eq("State", got.State, want.State)
	d.eq("Image", got.Image, want.Image)
	d.eq("Resources", got.Resources, want.Resources)
	d.strMap("Env", got.Env, want.Env)
	d.strMap("Metadata", got.Metadata, want.Metadata)
	d.eq("ContainerID", got.ContainerID, want.ContainerID)
	d.eq("Instance", got.Instance, want.Instance)
	d.eq("FailureReason", got.FailureReason, want.FailureReason)
	d.eq("ResourceVersion", got.ResourceVersion, want.ResourceVersion)
	if (got.Suspension == nil) != (want.Suspension == nil) {
		d.eq("Suspension", got.Suspension, want.Suspension)
	} else if got.Suspension != nil {
		d.eq("Suspension", *got.Suspension, *want.Suspension)
	}
	d.time("CreatedAt", got.CreatedAt, want.CreatedAt)
	d.time("UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	d.optTime("ExpiresAt", got.ExpiresAt, want.ExpiresAt)
	d.report(t, what)
}

func checkJob(t *testing.T, what string, got, want *sandbox.Job) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: nil job", what)
	}
	var d differ
	d.eq("ID", got.ID, want.ID)
	d.eq("Tenant", got.Tenant, want.Tenant)
	d.eq("SandboxID", got.SandboxID, want.SandboxID)
	if len(got.Command) != 0 || len(want.Command) != 0 {
		d.eq("Command", got.Command, want.Command)
	}
	d.eq("Script", got.Script, want.Script)
	d.eq("Cwd", got.Cwd, want.Cwd)
	d.eq("State", got.State, want.State)
	d.eq("ExitCode", got.ExitCode, want.ExitCode) // DeepEqual keeps nil apart from a pointer to 0
	d.eq("ExitReason", got.ExitReason, want.ExitReason)
	d.eq("Signal", got.Signal, want.Signal)
	d.eq("Error", got.Error, want.Error)
	d.eq("StdoutBytes", got.StdoutBytes, want.StdoutBytes)
	d.eq("StderrBytes", got.StderrBytes, want.StderrBytes)
	d.eq("StdoutTruncated", got.StdoutTruncated, want.StdoutTruncated)
	d.eq("StderrTruncated", got.StderrTruncated, want.StderrTruncated)
	d.eq("TimeoutMS", got.TimeoutMS, want.TimeoutMS)
	d.time("CreatedAt", got.CreatedAt, want.CreatedAt)
	d.optTime("StartedAt", got.StartedAt, want.StartedAt)
	d.optTime("FinishedAt", got.FinishedAt, want.FinishedAt)
	wantMode := want.Mode
	if wantMode == "" {
		wantMode = sandbox.JobModeSync // the stored default
	}
	d.eq("Mode", got.Mode, wantMode)
	d.report(t, what)
}

func sandboxIDs(list []*sandbox.Sandbox) []string {
	ids := make([]string, 0, len(list))
	for _, sb := range list {
		ids = append(ids, sb.ID)
	}
	return ids
}

func jobIDs(list []*sandbox.Job) []string {
	ids := make([]string, 0, len(list))
	for _, j := range list {
		ids = append(ids, j.ID)
	}
	return ids
}

func testPing(t *testing.T, s store.Store) {
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

func testSandboxRoundTrip(t *testing.T, s store.Store) {
	expires := base.Add(time.Hour + 7).In(west)
	full := &sandbox.Sandbox{
		ID:              "sbx_full",
		Tenant:          "tenant-1",
		Profile:         "code-python-data",
		Runtime:         sandbox.RuntimeRunsc,
		RiskLevel:       sandbox.RiskUntrusted,
		State:           sandbox.StateLeased,
		Image:           "genesis/code-python-data:2024.1",
		Resources:       sandbox.Resources{CPU: 1.25, MemoryMB: 2048, Pids: 256, DiskMB: 4096},
		Env:             map[string]string{"PATH": "/usr/bin", "EMPTY": "", "UNICODE": "héllo ✓ \"quoted\""},
		Metadata:        map[string]string{"owner": "agent-7", "dotted.key": "v", `quote"key`: "x"},
		ContainerID:     "3f2a9c0d1e",
		FailureReason:   "previous attempt failed",
		ResourceVersion: 42, // ignored: a new record starts at 1
		CreatedAt:       base.In(east),
		UpdatedAt:       base.Add(1).In(west),
		ExpiresAt:       &expires,
		Suspension: &sandbox.Suspension{ResumeState: sandbox.StateLeased, Operation: "hibernating", SnapshotID: "snap_0123456789abcdef",
			Memory: true, Since: base.Add(2).In(east)},
	}
	want := *full
	want.ResourceVersion = 1
	su := *full.Suspension
	su.Since = su.Since.UTC()
	want.Suspension = &su
	want.Env = maps.Clone(full.Env)
	want.Metadata = maps.Clone(full.Metadata)
	mustCreateSandbox(t, s, full)
	if full.ResourceVersion != 1 {
		t.Errorf("CreateSandbox left ResourceVersion = %d on its argument, want 1", full.ResourceVersion)
	}
	// The store must not keep the caller's maps.
	full.Env["PATH"] = "changed"
	full.Metadata["owner"] = "changed"

	checkSandbox(t, "Get(any tenant)", mustGetSandbox(t, s, "", "sbx_full"), &want)
	checkSandbox(t, "Get(own tenant)", mustGetSandbox(t, s, "tenant-1", "sbx_full"), &want)

	minimal := &sandbox.Sandbox{ID: "sbx_min", State: sandbox.StateCreated, CreatedAt: base.Add(time.Second), UpdatedAt: base.Add(time.Second)}
	mustCreateSandbox(t, s, minimal)
	wantMin := *minimal
	wantMin.ResourceVersion = 1
	got := mustGetSandbox(t, s, "", "sbx_min")
	checkSandbox(t, "Get(minimal)", got, &wantMin)
	if got.ExpiresAt != nil {
		t.Errorf("minimal sandbox ExpiresAt = %v, want nil", got.ExpiresAt)
	}

	list, err := s.ListSandboxes(t.Context(), store.SandboxFilter{})
	if err != nil {
		t.Fatalf("ListSandboxes: %v", err)
	}
	if got, want := sandboxIDs(list), []string{"sbx_full", "sbx_min"}; !slices.Equal(got, want) {
		t.Fatalf("ListSandboxes = %v, want %v", got, want)
	}
	checkSandbox(t, "List[0]", list[0], &want)
	checkSandbox(t, "List[1]", list[1], &wantMin)
}

func testSandboxDuplicateID(t *testing.T, s store.Store) {
	first := newSandbox("sbx_dup", "tenant-1", base)
	mustCreateSandbox(t, s, first)
	second := newSandbox("sbx_dup", "tenant-2", base.Add(time.Minute))
	second.Profile = "tool-basic"
	wantClass(t, "second CreateSandbox with the same id", s.CreateSandbox(t.Context(), second), errdefs.ErrAlreadyExists)

	want := newSandbox("sbx_dup", "tenant-1", base)
	want.ResourceVersion = 1
	checkSandbox(t, "after duplicate create", mustGetSandbox(t, s, "", "sbx_dup"), want)
}

func testTenantIsolation(t *testing.T, s store.Store) {
	mustCreateSandbox(t, s, newSandbox("sbx_a", "tenant-a", base))
	mustCreateSandbox(t, s, newSandbox("sbx_b", "tenant-b", base.Add(time.Second)))
	mustCreateJob(t, s, newJob("job_a", "tenant-a", "sbx_a", base))
	mustCreateJob(t, s, newJob("job_b", "tenant-b", "sbx_b", base.Add(time.Second)))

	_, err := s.GetSandbox(t.Context(), "tenant-b", "sbx_a")
	wantClass(t, "GetSandbox of another tenant's sandbox", err, errdefs.ErrNotFound)
	mustGetSandbox(t, s, "tenant-a", "sbx_a")
	mustGetSandbox(t, s, "", "sbx_a")

	_, err = s.GetJob(t.Context(), "tenant-b", "job_a")
	wantClass(t, "GetJob of another tenant's job", err, errdefs.ErrNotFound)
	mustGetJob(t, s, "tenant-a", "job_a")
	mustGetJob(t, s, "", "job_a")

	for tenant, want := range map[string][]string{"tenant-a": {"sbx_a"}, "tenant-b": {"sbx_b"}, "tenant-c": {}} {
		list, err := s.ListSandboxes(t.Context(), store.SandboxFilter{Tenant: tenant})
		if err != nil {
			t.Fatalf("ListSandboxes(%s): %v", tenant, err)
		}
		if got := sandboxIDs(list); !slices.Equal(got, want) {
			t.Errorf("ListSandboxes(tenant %s) = %v, want %v", tenant, got, want)
		}
	}
	for tenant, want := range map[string][]string{"tenant-a": {"job_a"}, "tenant-b": {"job_b"}, "tenant-c": {}} {
		list, err := s.ListJobs(t.Context(), store.JobFilter{Tenant: tenant})
		if err != nil {
			t.Fatalf("ListJobs(%s): %v", tenant, err)
		}
		if got := jobIDs(list); !slices.Equal(got, want) {
			t.Errorf("ListJobs(tenant %s) = %v, want %v", tenant, got, want)
		}
	}
}

func testListSandboxesFilters(t *testing.T, s store.Store) {
	type fixture struct {
		id, tenant, profile string
		state               sandbox.State
		md                  map[string]string
		created             time.Time
	}
	// Inserted out of creation order, with creation times written in zones
	// whose local clock order differs from their instant order.
	fixtures := []fixture{
		{"s4", "a", "p1", sandbox.StateLeased, nil, base.Add(4 * time.Second).In(west)},
		{"s1", "a", "p1", sandbox.StateReady, map[string]string{"team": "red", "env": "prod"}, base.Add(1 * time.Second).In(east)},
		{"s6", "a", "p1", sandbox.StateDestroyed, map[string]string{"team": "red", "env": "dev"}, base.Add(6 * time.Second)},
		{"s3", "b", "p1", sandbox.StateFailed, map[string]string{"team": "blue", "env": "prod"}, base.Add(3 * time.Second).In(east)},
		{"s5", "b", "p2", sandbox.StateCreated, map[string]string{"team": "red", "env": "prod"}, base.Add(5 * time.Second).In(west)},
		{"s2", "a", "p2", sandbox.StateDestroyed, map[string]string{"team": "red"}, base.Add(2*time.Second + 1)},
	}
	for _, f := range fixtures {
		sb := newSandbox(f.id, f.tenant, f.created)
		sb.Profile, sb.State, sb.Metadata = f.profile, f.state, f.md
		mustCreateSandbox(t, s, sb)
	}
	tests := []struct {
		name string
		f    store.SandboxFilter
		want []string
	}{
		{"all oldest first", store.SandboxFilter{}, []string{"s1", "s2", "s3", "s4", "s5", "s6"}},
		{"tenant", store.SandboxFilter{Tenant: "a"}, []string{"s1", "s2", "s4", "s6"}},
		{"states", store.SandboxFilter{States: []sandbox.State{sandbox.StateReady, sandbox.StateLeased}}, []string{"s1", "s4"}},
		{"state none match", store.SandboxFilter{States: []sandbox.State{sandbox.StateBusy}}, nil},
		{"profile", store.SandboxFilter{Profile: "p1"}, []string{"s1", "s3", "s4", "s6"}},
		{"metadata one pair", store.SandboxFilter{Metadata: map[string]string{"team": "red"}}, []string{"s1", "s2", "s5", "s6"}},
		{"metadata all pairs", store.SandboxFilter{Metadata: map[string]string{"team": "red", "env": "prod"}}, []string{"s1", "s5"}},
		{"metadata value differs", store.SandboxFilter{Metadata: map[string]string{"team": "green"}}, nil},
		{"metadata empty value", store.SandboxFilter{Metadata: map[string]string{"team": ""}}, nil},
		{"exclude final", store.SandboxFilter{ExcludeFinal: true}, []string{"s1", "s3", "s4", "s5"}},
		{"limit", store.SandboxFilter{Limit: 2}, []string{"s1", "s2"}},
		{"limit above count", store.SandboxFilter{Limit: 10}, []string{"s1", "s2", "s3", "s4", "s5", "s6"}},
		{"tenant profile exclude final", store.SandboxFilter{Tenant: "a", Profile: "p1", ExcludeFinal: true}, []string{"s1", "s4"}},
		{"tenant metadata", store.SandboxFilter{Tenant: "b", Metadata: map[string]string{"team": "red"}}, []string{"s5"}},
		{"states limit", store.SandboxFilter{States: []sandbox.State{sandbox.StateDestroyed}, Limit: 1}, []string{"s2"}},
		{"metadata limit", store.SandboxFilter{Metadata: map[string]string{"env": "prod"}, Limit: 2}, []string{"s1", "s3"}},
	}
	for _, tc := range tests {
		list, err := s.ListSandboxes(t.Context(), tc.f)
		if err != nil {
			t.Errorf("%s: ListSandboxes(%+v): %v", tc.name, tc.f, err)
			continue
		}
		if got := sandboxIDs(list); !slices.Equal(got, tc.want) {
			t.Errorf("%s: ListSandboxes(%+v) = %v, want %v", tc.name, tc.f, got, tc.want)
		}
	}
}

func testUpdateSandbox(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateSandbox(t, s, newSandbox("sbx_u", "tenant-1", base))
	want := newSandbox("sbx_u", "tenant-1", base)

	now := base.Add(time.Hour + 3).In(east)
	expires := base.Add(2 * time.Hour)
	got, err := s.UpdateSandbox(ctx, "sbx_u", 0, now, func(sb *sandbox.Sandbox) error {
		if sb.ResourceVersion != 1 {
			t.Errorf("fn saw ResourceVersion %d, want 1", sb.ResourceVersion)
		}
		sb.State = sandbox.StateLeased
		sb.Metadata = map[string]string{"lease": "l1"}
		sb.Env = map[string]string{"X": "1"}
		sb.ContainerID = "c2"
		sb.Resources.CPU = 2
		sb.ExpiresAt = &expires
		return nil
	})
	if err != nil {
		t.Fatalf("UpdateSandbox: %v", err)
	}
	want.State, want.Metadata, want.Env, want.ContainerID = sandbox.StateLeased, map[string]string{"lease": "l1"}, map[string]string{"X": "1"}, "c2"
	want.Resources.CPU, want.ExpiresAt = 2, &expires
	want.ResourceVersion, want.UpdatedAt = 2, now
	checkSandbox(t, "UpdateSandbox result", got, want)
	checkSandbox(t, "Get after UpdateSandbox", mustGetSandbox(t, s, "", "sbx_u"), want)

	// If-Match with the current version succeeds.
	now2 := now.Add(time.Minute)
	got, err = s.UpdateSandbox(ctx, "sbx_u", 2, now2, func(sb *sandbox.Sandbox) error {
		sb.State = sandbox.StateBusy
		return nil
	})
	if err != nil {
		t.Fatalf("UpdateSandbox(ifVersion 2): %v", err)
	}
	want.State, want.ResourceVersion, want.UpdatedAt = sandbox.StateBusy, 3, now2
	checkSandbox(t, "UpdateSandbox(ifVersion current) result", got, want)

	// A stale version fails without calling fn and changes nothing.
	for _, stale := range []int64{1, 2, 4} {
		called := false
		_, err = s.UpdateSandbox(ctx, "sbx_u", stale, now2.Add(time.Hour), func(sb *sandbox.Sandbox) error {
			called = true
			sb.State = sandbox.StateFailed
			return nil
		})
		wantClass(t, fmt.Sprintf("UpdateSandbox(ifVersion %d, stored 3)", stale), err, errdefs.ErrPreconditionFailed)
		if called {
			t.Errorf("UpdateSandbox(ifVersion %d) called fn despite the version mismatch", stale)
		}
	}
	checkSandbox(t, "Get after stale updates", mustGetSandbox(t, s, "", "sbx_u"), want)

	// Optional fields can be cleared.
	now3 := now2.Add(time.Second)
	if _, err := s.UpdateSandbox(ctx, "sbx_u", 3, now3, func(sb *sandbox.Sandbox) error {
		sb.ExpiresAt, sb.Metadata, sb.Env, sb.ContainerID = nil, nil, nil, ""
		return nil
	}); err != nil {
		t.Fatalf("UpdateSandbox(clear): %v", err)
	}
	want.ExpiresAt, want.Metadata, want.Env, want.ContainerID = nil, nil, nil, ""
	want.ResourceVersion, want.UpdatedAt = 4, now3
	checkSandbox(t, "Get after clearing fields", mustGetSandbox(t, s, "", "sbx_u"), want)
}

func testUpdateSandboxFnError(t *testing.T, s store.Store) {
	mustCreateSandbox(t, s, newSandbox("sbx_e", "tenant-1", base))
	errBoom := errors.New("boom")
	_, err := s.UpdateSandbox(t.Context(), "sbx_e", 0, base.Add(time.Hour), func(sb *sandbox.Sandbox) error {
		sb.State = sandbox.StateFailed
		sb.FailureReason = "should not be stored"
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Errorf("UpdateSandbox with failing fn: error = %v, want fn's error", err)
	}
	want := newSandbox("sbx_e", "tenant-1", base)
	want.ResourceVersion = 1
	checkSandbox(t, "Get after aborted update", mustGetSandbox(t, s, "", "sbx_e"), want)
}

func testUpdateSandboxKeepsIdentity(t *testing.T, s store.Store) {
	created := newSandbox("sbx_i", "tenant-1", base)
	created.Instance = "instance-1"
	mustCreateSandbox(t, s, created)
	now := base.Add(time.Hour)
	got, err := s.UpdateSandbox(t.Context(), "sbx_i", 0, now, func(sb *sandbox.Sandbox) error {
		sb.ID = "sbx_other"
		sb.Tenant = "tenant-evil"
		sb.Instance = "instance-2" // a sandbox stays with the service that made it
		sb.CreatedAt = base.Add(-time.Hour)
		sb.ResourceVersion = 99
		sb.UpdatedAt = base.Add(-time.Hour)
		sb.Profile = "tool-basic"
		return nil
	})
	want := newSandbox("sbx_i", "tenant-1", base)
	want.Instance = "instance-1"
	if err == nil {
		// Changes to identity are ignored; the rest is stored.
		want.Profile, want.ResourceVersion, want.UpdatedAt = "tool-basic", 2, now
		checkSandbox(t, "UpdateSandbox result", got, want)
	} else {
		// Or the whole update is rejected.
		want.ResourceVersion = 1
	}
	checkSandbox(t, "Get after identity change", mustGetSandbox(t, s, "tenant-1", "sbx_i"), want)
	_, err = s.GetSandbox(t.Context(), "", "sbx_other")
	wantClass(t, "GetSandbox(new id fn tried to set)", err, errdefs.ErrNotFound)
}

const concurrentWriters = 20

func testConcurrentUpdateSandbox(t *testing.T, s store.Store) {
	mustCreateSandbox(t, s, newSandbox("sbx_c", "tenant-1", base))
	var wg sync.WaitGroup
	for i := range concurrentWriters {
		wg.Go(func() {
			_, err := s.UpdateSandbox(t.Context(), "sbx_c", 0, base.Add(time.Duration(i)*time.Second), func(sb *sandbox.Sandbox) error {
				n, _ := strconv.Atoi(sb.Metadata["counter"])
				if sb.Metadata == nil {
					sb.Metadata = map[string]string{}
				}
				sb.Metadata["counter"] = strconv.Itoa(n + 1)
				return nil
			})
			if err != nil {
				t.Errorf("writer %d: UpdateSandbox: %v", i, err)
			}
		})
	}
	wg.Wait()
	got := mustGetSandbox(t, s, "", "sbx_c")
	if got.Metadata["counter"] != strconv.Itoa(concurrentWriters) {
		t.Errorf("counter = %q after %d concurrent increments (lost updates)", got.Metadata["counter"], concurrentWriters)
	}
	if got.ResourceVersion != concurrentWriters+1 {
		t.Errorf("ResourceVersion = %d after %d updates, want %d", got.ResourceVersion, concurrentWriters, concurrentWriters+1)
	}
}

// testConcurrentIfMatchUpdateSandbox plays clients that read, compute the new
// value outside the store and write back with If-Match, retrying on
// ErrPreconditionFailed: the version check must be atomic with the write.
func testConcurrentIfMatchUpdateSandbox(t *testing.T, s store.Store) {
	mustCreateSandbox(t, s, newSandbox("sbx_m", "tenant-1", base))
	const maxAttempts = 1000
	var wg sync.WaitGroup
	for i := range concurrentWriters {
		wg.Go(func() {
			for range maxAttempts {
				cur, err := s.GetSandbox(t.Context(), "", "sbx_m")
				if err != nil {
					t.Errorf("writer %d: GetSandbox: %v", i, err)
					return
				}
				n, _ := strconv.Atoi(cur.Metadata["counter"])
				next := strconv.Itoa(n + 1) // computed from what the client read
				_, err = s.UpdateSandbox(t.Context(), "sbx_m", cur.ResourceVersion, base, func(sb *sandbox.Sandbox) error {
					sb.Metadata = map[string]string{"counter": next}
					return nil
				})
				if errors.Is(err, errdefs.ErrPreconditionFailed) {
					continue
				}
				if err != nil {
					t.Errorf("writer %d: UpdateSandbox: %v", i, err)
				}
				return
			}
			t.Errorf("writer %d: no successful update in %d attempts", i, maxAttempts)
		})
	}
	wg.Wait()
	got := mustGetSandbox(t, s, "", "sbx_m")
	if got.Metadata["counter"] != strconv.Itoa(concurrentWriters) {
		t.Errorf("counter = %q after %d If-Match increments (lost updates)", got.Metadata["counter"], concurrentWriters)
	}
	if got.ResourceVersion != concurrentWriters+1 {
		t.Errorf("ResourceVersion = %d, want %d", got.ResourceVersion, concurrentWriters+1)
	}
}

func testJobRoundTrip(t *testing.T, s store.Store) {
	mustCreateSandbox(t, s, newSandbox("sbx_j", "tenant-1", base))
	full := &sandbox.Job{
		ID:              "job_full",
		Tenant:          "tenant-1",
		SandboxID:       "sbx_j",
		Command:         []string{"python3", "-c", "print('hi \"there\"')", ""},
		Script:          "#!/bin/sh\necho ✓\n",
		Cwd:             "/work/dir with space",
		State:           sandbox.JobFailed,
		ExitCode:        ptr(137),
		ExitReason:      sandbox.ExitOOM,
		Signal:          "SIGKILL",
		Error:           "out of memory",
		StdoutBytes:     1 << 40,
		StderrBytes:     12,
		StdoutTruncated: true,
		StderrTruncated: false,
		TimeoutMS:       30000,
		CreatedAt:       base.In(east),
		StartedAt:       ptr(base.Add(1).In(west)),
		FinishedAt:      ptr(base.Add(time.Minute + 999)),
	}
	want := *full
	want.Command = slices.Clone(full.Command)
	mustCreateJob(t, s, full)
	full.Command[0] = "changed" // the store must not keep the caller's slice
	checkJob(t, "GetJob(full)", mustGetJob(t, s, "tenant-1", "job_full"), &want)

	pending := &sandbox.Job{ID: "job_pending", Tenant: "tenant-1", SandboxID: "sbx_j", State: sandbox.JobPending, CreatedAt: base.Add(time.Second)}
	mustCreateJob(t, s, pending)
	got := mustGetJob(t, s, "", "job_pending")
	checkJob(t, "GetJob(pending)", got, pending)
	if got.ExitCode != nil || got.StartedAt != nil || got.FinishedAt != nil {
		t.Errorf("pending job: ExitCode %v, StartedAt %v, FinishedAt %v; want all nil", got.ExitCode, got.StartedAt, got.FinishedAt)
	}

	zero := newJob("job_zero", "tenant-1", "sbx_j", base.Add(2*time.Second))
	zero.State, zero.ExitCode, zero.ExitReason = sandbox.JobSucceeded, ptr(0), sandbox.ExitExited
	zero.StartedAt, zero.FinishedAt = ptr(base.Add(2*time.Second)), ptr(base.Add(3*time.Second))
	mustCreateJob(t, s, zero)
	got = mustGetJob(t, s, "", "job_zero")
	checkJob(t, "GetJob(exit code 0)", got, zero)
	if got.ExitCode == nil {
		t.Errorf("exit code 0 came back as nil")
	}

	list, err := s.ListJobs(t.Context(), store.JobFilter{SandboxID: "sbx_j"})
	if err != nil {
		t.Fatalf("ListJobs: %v", err)
	}
	if got, want := jobIDs(list), []string{"job_full", "job_pending", "job_zero"}; !slices.Equal(got, want) {
		t.Fatalf("ListJobs = %v, want %v", got, want)
	}
	checkJob(t, "ListJobs[0]", list[0], &want)
}

func testJobDuplicateID(t *testing.T, s store.Store) {
	mustCreateSandbox(t, s, newSandbox("sbx_j", "tenant-1", base))
	mustCreateJob(t, s, newJob("job_dup", "tenant-1", "sbx_j", base))
	second := newJob("job_dup", "tenant-1", "sbx_j", base.Add(time.Second))
	second.Script = "other"
	wantClass(t, "second CreateJob with the same id", s.CreateJob(t.Context(), second), errdefs.ErrAlreadyExists)
	checkJob(t, "after duplicate create", mustGetJob(t, s, "", "job_dup"), newJob("job_dup", "tenant-1", "sbx_j", base))
}

func testUpdateJobLifecycle(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateSandbox(t, s, newSandbox("sbx_j", "tenant-1", base))
	mustCreateJob(t, s, newJob("job_l", "tenant-1", "sbx_j", base))
	want := newJob("job_l", "tenant-1", "sbx_j", base)

	started := base.Add(time.Second).In(east)
	got, err := s.UpdateJob(ctx, "job_l", func(j *sandbox.Job) error {
		if j.State != sandbox.JobPending {
			t.Errorf("fn saw state %s, want pending", j.State)
		}
		j.State, j.StartedAt = sandbox.JobRunning, &started
		return nil
	})
	if err != nil {
		t.Fatalf("UpdateJob(running): %v", err)
	}
	want.State, want.StartedAt = sandbox.JobRunning, &started
	checkJob(t, "UpdateJob(running) result", got, want)
	checkJob(t, "GetJob after running", mustGetJob(t, s, "", "job_l"), want)

	finished := started.Add(1500 * time.Millisecond)
	if _, err := s.UpdateJob(ctx, "job_l", func(j *sandbox.Job) error {
		j.State = sandbox.FinalJobState(sandbox.ExitExited, 0)
		j.ExitCode, j.ExitReason, j.FinishedAt = ptr(0), sandbox.ExitExited, &finished
		j.StdoutBytes, j.StderrBytes, j.StderrTruncated = 4096, 7, true
		return nil
	}); err != nil {
		t.Fatalf("UpdateJob(final): %v", err)
	}
	want.State, want.ExitCode, want.ExitReason, want.FinishedAt = sandbox.JobSucceeded, ptr(0), sandbox.ExitExited, &finished
	want.StdoutBytes, want.StderrBytes, want.StderrTruncated = 4096, 7, true
	checkJob(t, "GetJob after final state", mustGetJob(t, s, "tenant-1", "job_l"), want)
}

// testFinishJob checks that FinishJob writes a job's end fields, whatever
// the record held, returns the record as stored and leaves the rest of it
// (another caller's command, script, timeout) alone; a job not recorded is
// not found.
func testFinishJob(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateSandbox(t, s, newSandbox("sbx_f", "tenant-1", base))
	started := base.Add(time.Second)
	rec := newJob("job_f", "tenant-1", "sbx_f", base)
	rec.State, rec.StartedAt, rec.Script, rec.Command, rec.TimeoutMS = sandbox.JobRunning, &started, "", []string{"sh", "-c", "exit 7"}, 30000
	mustCreateJob(t, s, rec)

	finished := started.Add(250 * time.Millisecond).In(east)
	end := store.CloneJob(rec)
	end.Command, end.TimeoutMS = []string{"ignored"}, 1 // not end fields: not written
	end.State, end.ExitCode, end.ExitReason, end.Signal, end.Error = sandbox.JobFailed, ptr(7), sandbox.ExitExited, "", ""
	end.StdoutBytes, end.StderrBytes, end.StdoutTruncated, end.StderrTruncated, end.FinishedAt = 1<<20, 3, true, false, &finished
	got, err := s.FinishJob(ctx, end)
	if err != nil {
		t.Fatalf("FinishJob: %v", err)
	}
	want := store.CloneJob(rec)
	want.State, want.ExitCode, want.ExitReason, want.FinishedAt = sandbox.JobFailed, ptr(7), sandbox.ExitExited, &finished
	want.StdoutBytes, want.StderrBytes, want.StdoutTruncated = 1<<20, 3, true
	checkJob(t, "FinishJob result", got, want)
	checkJob(t, "GetJob after FinishJob", mustGetJob(t, s, "tenant-1", "job_f"), want)

	// A second end overwrites the first (the caller that owns the job's
	// end decides), from any state.
	end.State, end.ExitCode, end.ExitReason, end.Error = sandbox.JobLost, nil, sandbox.ExitLost, "agent gone"
	if _, err := s.FinishJob(ctx, end); err != nil {
		t.Fatalf("FinishJob again: %v", err)
	}
	want.State, want.ExitCode, want.ExitReason, want.Error = sandbox.JobLost, nil, sandbox.ExitLost, "agent gone"
	checkJob(t, "GetJob after a second FinishJob", mustGetJob(t, s, "", "job_f"), want)

	missing := newJob("job_missing", "tenant-1", "sbx_f", base)
	missing.State, missing.FinishedAt = sandbox.JobSucceeded, &finished
	if _, err := s.FinishJob(ctx, missing); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("FinishJob of a job not recorded: %v, want ErrNotFound", err)
	}
}

func testUpdateJobFnError(t *testing.T, s store.Store) {
	mustCreateSandbox(t, s, newSandbox("sbx_j", "tenant-1", base))
	mustCreateJob(t, s, newJob("job_e", "tenant-1", "sbx_j", base))
	errBoom := errors.New("boom")
	_, err := s.UpdateJob(t.Context(), "job_e", func(j *sandbox.Job) error {
		j.State, j.ExitCode = sandbox.JobLost, ptr(1)
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Errorf("UpdateJob with failing fn: error = %v, want fn's error", err)
	}
	checkJob(t, "GetJob after aborted update", mustGetJob(t, s, "", "job_e"), newJob("job_e", "tenant-1", "sbx_j", base))
}

func testUpdateJobKeepsIdentity(t *testing.T, s store.Store) {
	mustCreateSandbox(t, s, newSandbox("sbx_j", "tenant-1", base))
	mustCreateSandbox(t, s, newSandbox("sbx_k", "tenant-2", base))
	created := newJob("job_i", "tenant-1", "sbx_j", base)
	created.Mode = sandbox.JobModeBackground
	mustCreateJob(t, s, created)
	got, err := s.UpdateJob(t.Context(), "job_i", func(j *sandbox.Job) error {
		j.ID, j.Tenant, j.SandboxID, j.CreatedAt = "job_other", "tenant-2", "sbx_k", base.Add(time.Hour)
		j.Mode = sandbox.JobModeSync // fixed when the job is created
		j.Cwd = "/tmp"
		return nil
	})
	want := newJob("job_i", "tenant-1", "sbx_j", base)
	want.Mode = sandbox.JobModeBackground
	if err == nil {
		want.Cwd = "/tmp"
		checkJob(t, "UpdateJob result", got, want)
	}
	checkJob(t, "GetJob after identity change", mustGetJob(t, s, "tenant-1", "job_i"), want)
	_, err = s.GetJob(t.Context(), "", "job_other")
	wantClass(t, "GetJob(new id fn tried to set)", err, errdefs.ErrNotFound)
}

func testConcurrentUpdateJob(t *testing.T, s store.Store) {
	mustCreateSandbox(t, s, newSandbox("sbx_j", "tenant-1", base))
	mustCreateJob(t, s, newJob("job_c", "tenant-1", "sbx_j", base))
	var wg sync.WaitGroup
	for i := range concurrentWriters {
		wg.Go(func() {
			if _, err := s.UpdateJob(t.Context(), "job_c", func(j *sandbox.Job) error {
				j.StdoutBytes++
				return nil
			}); err != nil {
				t.Errorf("writer %d: UpdateJob: %v", i, err)
			}
		})
	}
	wg.Wait()
	if got := mustGetJob(t, s, "", "job_c").StdoutBytes; got != concurrentWriters {
		t.Errorf("StdoutBytes = %d after %d concurrent increments (lost updates)", got, concurrentWriters)
	}
}

func testListJobsFilters(t *testing.T, s store.Store) {
	mustCreateSandbox(t, s, newSandbox("sbx_a", "a", base))
	mustCreateSandbox(t, s, newSandbox("sbx_b", "b", base))
	type fixture struct {
		id, tenant, sandboxID string
		state                 sandbox.JobState
		created               time.Time
	}
	fixtures := []fixture{
		{"j4", "a", "sbx_a", sandbox.JobSucceeded, base.Add(4 * time.Second).In(west)},
		{"j2", "a", "sbx_a", sandbox.JobRunning, base.Add(2 * time.Second).In(east)},
		{"j5", "b", "sbx_b", sandbox.JobFailed, base.Add(5 * time.Second)},
		{"j1", "a", "sbx_a", sandbox.JobPending, base.Add(1 * time.Second).In(west)},
		{"j3", "b", "sbx_b", sandbox.JobSucceeded, base.Add(3*time.Second + 1).In(east)},
	}
	for _, f := range fixtures {
		j := newJob(f.id, f.tenant, f.sandboxID, f.created)
		j.State = f.state
		mustCreateJob(t, s, j)
	}
	tests := []struct {
		name string
		f    store.JobFilter
		want []string
	}{
		{"all oldest first", store.JobFilter{}, []string{"j1", "j2", "j3", "j4", "j5"}},
		{"sandbox", store.JobFilter{SandboxID: "sbx_a"}, []string{"j1", "j2", "j4"}},
		{"unknown sandbox", store.JobFilter{SandboxID: "sbx_none"}, nil},
		{"states", store.JobFilter{States: []sandbox.JobState{sandbox.JobSucceeded, sandbox.JobFailed}}, []string{"j3", "j4", "j5"}},
		{"tenant", store.JobFilter{Tenant: "b"}, []string{"j3", "j5"}},
		{"sandbox and state", store.JobFilter{SandboxID: "sbx_a", States: []sandbox.JobState{sandbox.JobSucceeded}}, []string{"j4"}},
		{"tenant and other tenant's sandbox", store.JobFilter{Tenant: "a", SandboxID: "sbx_b"}, nil},
		{"limit", store.JobFilter{Limit: 2}, []string{"j1", "j2"}},
		{"states limit", store.JobFilter{States: []sandbox.JobState{sandbox.JobSucceeded, sandbox.JobFailed}, Limit: 1}, []string{"j3"}},
	}
	for _, tc := range tests {
		list, err := s.ListJobs(t.Context(), tc.f)
		if err != nil {
			t.Errorf("%s: ListJobs(%+v): %v", tc.name, tc.f, err)
			continue
		}
		if got := jobIDs(list); !slices.Equal(got, tc.want) {
			t.Errorf("%s: ListJobs(%+v) = %v, want %v", tc.name, tc.f, got, tc.want)
		}
	}
}

func testNotFound(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateSandbox(t, s, newSandbox("sbx_known", "tenant-1", base))
	mustCreateJob(t, s, newJob("job_known", "tenant-1", "sbx_known", base))

	_, err := s.GetSandbox(ctx, "", "sbx_missing")
	wantClass(t, "GetSandbox(unknown, any tenant)", err, errdefs.ErrNotFound)
	_, err = s.GetSandbox(ctx, "tenant-1", "sbx_missing")
	wantClass(t, "GetSandbox(unknown, tenant)", err, errdefs.ErrNotFound)
	_, err = s.GetJob(ctx, "", "job_missing")
	wantClass(t, "GetJob(unknown)", err, errdefs.ErrNotFound)
	_, err = s.GetJob(ctx, "", "sbx_known") // a sandbox id is not a job id
	wantClass(t, "GetJob(sandbox id)", err, errdefs.ErrNotFound)

	for _, ifVersion := range []int64{0, 1} {
		called := false
		_, err = s.UpdateSandbox(ctx, "sbx_missing", ifVersion, base, func(*sandbox.Sandbox) error { called = true; return nil })
		wantClass(t, fmt.Sprintf("UpdateSandbox(unknown, ifVersion %d)", ifVersion), err, errdefs.ErrNotFound)
		if called {
			t.Errorf("UpdateSandbox(unknown) called fn")
		}
	}
	called := false
	_, err = s.UpdateJob(ctx, "job_missing", func(*sandbox.Job) error { called = true; return nil })
	wantClass(t, "UpdateJob(unknown)", err, errdefs.ErrNotFound)
	if called {
		t.Errorf("UpdateJob(unknown) called fn")
	}
}
