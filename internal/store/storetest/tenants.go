package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/tenant"
)

// testTenants checks tenant records: create, duplicate, put (replace keeping
// creation time), optimistic updates, identity fields, delete with keys.
func testTenants(t *testing.T, st store.Store) {
	ctx := context.Background()
	acme := &tenant.Tenant{Name: "acme", Weight: 2, MinRiskLevel: "high", Quotas: tenant.Quotas{MaxSandboxes: 3, MaxCPU: 1.5, MaxMemoryMB: 2048, MaxLeases: 2},
		Source: tenant.SourceAPI, CreatedAt: base.In(east), UpdatedAt: base}
	if err := st.CreateTenant(ctx, acme); err != nil || acme.ResourceVersion != 1 {
		t.Fatalf("create: %v (version %d)", err, acme.ResourceVersion)
	}
	if err := st.CreateTenant(ctx, &tenant.Tenant{Name: "acme", CreatedAt: base, UpdatedAt: base}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("duplicate tenant: %v", err)
	}
	got, err := st.GetTenant(ctx, "acme")
	if err != nil || got.Weight != 2 || got.MinRiskLevel != "high" || got.Quotas != acme.Quotas || got.Source != tenant.SourceAPI ||
		!got.CreatedAt.Equal(base) || got.CreatedAt.Location() != time.UTC || got.ResourceVersion != 1 {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if _, err := st.GetTenant(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("unknown tenant: %v", err)
	}

	later := base.Add(time.Hour)
	put, err := st.PutTenant(ctx, &tenant.Tenant{Name: "acme", Admin: true, Source: tenant.SourceConfig, CreatedAt: later, UpdatedAt: later})
	if err != nil || !put.Admin || put.Weight != 0 || put.Source != tenant.SourceConfig || !put.CreatedAt.Equal(base) ||
		!put.UpdatedAt.Equal(later) || put.ResourceVersion != 2 {
		t.Fatalf("put over existing: %+v %v", put, err)
	}
	if p2, err := st.PutTenant(ctx, &tenant.Tenant{Name: "zeta", Source: tenant.SourceConfig, CreatedAt: later, UpdatedAt: later}); err != nil || p2.ResourceVersion != 1 {
		t.Fatalf("put new: %+v %v", p2, err)
	}

	if _, err := st.UpdateTenant(ctx, "acme", 1, later, func(*tenant.Tenant) error { t.Error("fn called on a version mismatch"); return nil }); !errors.Is(err, errdefs.ErrPreconditionFailed) {
		t.Fatalf("stale If-Match: %v", err)
	}
	up, err := st.UpdateTenant(ctx, "acme", 2, later.Add(time.Minute), func(x *tenant.Tenant) error {
		x.Quotas.MaxSandboxes, x.Name, x.Source, x.CreatedAt = 9, "evil", tenant.SourceAPI, later
		return nil
	})
	if err != nil || up.Quotas.MaxSandboxes != 9 || up.Name != "acme" || up.Source != tenant.SourceConfig || !up.CreatedAt.Equal(base) ||
		up.ResourceVersion != 3 || !up.UpdatedAt.Equal(later.Add(time.Minute)) {
		t.Fatalf("update: %+v %v", up, err)
	}
	boom := errors.New("boom")
	if _, err := st.UpdateTenant(ctx, "acme", 0, later, func(x *tenant.Tenant) error { x.Weight = 7; return boom }); !errors.Is(err, boom) {
		t.Fatalf("fn error: %v", err)
	}
	if g, _ := st.GetTenant(ctx, "acme"); g.Weight == 7 || g.ResourceVersion != 3 {
		t.Fatalf("aborted update stored: %+v", g)
	}
	if _, err := st.UpdateTenant(ctx, "nope", 0, later, func(*tenant.Tenant) error { return nil }); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("update unknown: %v", err)
	}

	list, err := st.ListTenants(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "acme" || list[1].Name != "zeta" {
		t.Fatalf("list: %v %v", names(list), err)
	}

	k, _, err := tenant.NewKey(randReader{}, "acme", "ci", base)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteTenant(ctx, "acme", 1); !errors.Is(err, errdefs.ErrPreconditionFailed) {
		t.Fatalf("delete with stale version: %v", err)
	}
	if err := st.DeleteTenant(ctx, "acme", 3); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := st.GetTenant(ctx, "acme"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("deleted tenant still there: %v", err)
	}
	if _, err := st.KeyByHash(ctx, k.Hash); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("key of a deleted tenant still found: %v", err)
	}
	if err := st.DeleteTenant(ctx, "acme", 0); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("delete again: %v", err)
	}
	// A tenant of the same name later starts with no keys.
	if err := st.CreateTenant(ctx, &tenant.Tenant{Name: "acme", CreatedAt: later, UpdatedAt: later}); err != nil {
		t.Fatal(err)
	}
	if keys, err := st.ListKeys(ctx, "acme"); err != nil || len(keys) != 0 {
		t.Fatalf("recreated tenant has keys %v %v", keys, err)
	}
}

func names(ts []*tenant.Tenant) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out
}

// randReader is a deterministic, non-repeating byte source for key
// generation in tests.
type randReader struct{}

var randCounter struct {
	sync.Mutex
	n uint64
}

func (randReader) Read(p []byte) (int, error) {
	randCounter.Lock()
	defer randCounter.Unlock()
	for i := range p {
		randCounter.n = randCounter.n*6364136223846793005 + 1442695040888963407
		p[i] = byte(randCounter.n >> 56)
	}
	return len(p), nil
}

// testKeys checks API keys: only the hash is needed to find one, keys of
// missing tenants are refused, revocation is once and per tenant.
func testKeys(t *testing.T, st store.Store) {
	ctx := context.Background()
	for _, n := range []string{"a", "b"} {
		if err := st.CreateTenant(ctx, &tenant.Tenant{Name: n, CreatedAt: base, UpdatedAt: base}); err != nil {
			t.Fatal(err)
		}
	}
	k1, secret1, _ := tenant.NewKey(randReader{}, "a", "first", base)
	k2, secret2, _ := tenant.NewKey(randReader{}, "a", "", base.Add(time.Second))
	k2.Scopes = []string{tenant.ScopeApprove}
	kb, _, _ := tenant.NewKey(randReader{}, "b", "", base)
	for _, k := range []*tenant.Key{k1, k2, kb} {
		if err := st.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CreateKey(ctx, k1); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("duplicate key: %v", err)
	}
	orphan, _, _ := tenant.NewKey(randReader{}, "ghost", "", base)
	if err := st.CreateKey(ctx, orphan); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("key of a missing tenant: %v", err)
	}
	got, err := st.KeyByHash(ctx, tenant.HashKey(secret1))
	if err != nil || got.ID != k1.ID || got.Tenant != "a" || got.Prefix != k1.Prefix || got.Description != "first" ||
		!got.Matches(tenant.HashKey(secret1)) || !got.CreatedAt.Equal(base) || got.Revoked() {
		t.Fatalf("by hash: %+v %v", got, err)
	}
	if len(got.Scopes) != 0 {
		t.Fatalf("a key made without scopes has %q", got.Scopes)
	}
	if got, err := st.KeyByHash(ctx, tenant.HashKey(secret2)); err != nil || len(got.Scopes) != 1 || got.Scopes[0] != tenant.ScopeApprove {
		t.Fatalf("the scopes of a key: %+v %v", got, err)
	}
	if _, err := st.KeyByHash(ctx, tenant.HashKey(secret1+"x")); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("unknown hash: %v", err)
	}
	keys, err := st.ListKeys(ctx, "a")
	if err != nil || len(keys) != 2 || keys[0].ID != k1.ID || keys[1].ID != k2.ID {
		t.Fatalf("list keys: %v %v", keys, err)
	}
	if _, err := st.RevokeKey(ctx, "b", k1.ID, base); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("revoke through another tenant: %v", err)
	}
	if k, _ := st.KeyByHash(ctx, k1.Hash); k.Revoked() {
		t.Fatal("a foreign revoke revoked the key")
	}
	at := base.Add(time.Hour)
	r, err := st.RevokeKey(ctx, "a", k1.ID, at)
	if err != nil || r.RevokedAt == nil || !r.RevokedAt.Equal(at) {
		t.Fatalf("revoke: %+v %v", r, err)
	}
	r, err = st.RevokeKey(ctx, "a", k1.ID, at.Add(time.Hour))
	if err != nil || !r.RevokedAt.Equal(at) {
		t.Fatalf("second revoke moved the time: %+v %v", r, err)
	}
	if k, _ := st.KeyByHash(ctx, k1.Hash); !k.Revoked() {
		t.Fatal("revocation not stored")
	}
	if _, err := st.RevokeKey(ctx, "a", "key_nope", at); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("revoke unknown: %v", err)
	}
}

// testAudit checks the audit log: seq order, filters, cursor paging that
// covers every record exactly once while inserts go on, and pruning.
func testAudit(t *testing.T, st store.Store) {
	ctx := context.Background()
	rec := func(i int, tn, action, target string, status int, code string) *tenant.AuditRecord {
		return &tenant.AuditRecord{Time: base.Add(time.Duration(i) * time.Second), Actor: "key_" + tn, Tenant: tn, Action: action,
			Target: target, Status: status, Code: code, RequestID: fmt.Sprintf("req_%d", i), Remote: "127.0.0.1:1"}
	}
	in := []*tenant.AuditRecord{
		rec(0, "a", "POST /v1/sandboxes", "sbx_1", 201, ""),
		rec(1, "b", "POST /v1/sandboxes", "sbx_2", 429, "quota_exceeded"),
		rec(2, "a", "DELETE /v1/sandboxes/{id}", "sbx_1", 204, ""),
		rec(3, "", "POST /v1/sandboxes", "", 401, "unauthenticated"),
		rec(4, "a", "PATCH /v1/sandboxes/{id}", "sbx_9", 404, "not_found"),
	}
	var last int64
	for _, r := range in {
		if err := st.AppendAudit(ctx, r); err != nil {
			t.Fatal(err)
		}
		if r.Seq <= last {
			t.Fatalf("seq %d after %d", r.Seq, last)
		}
		last = r.Seq
	}
	all, err := st.ListAudit(ctx, store.AuditFilter{})
	if err != nil || len(all) != len(in) {
		t.Fatalf("list all: %d %v", len(all), err)
	}
	if *all[1] != *in[1] {
		t.Fatalf("round trip: %+v, want %+v", *all[1], *in[1])
	}
	for _, tc := range []struct {
		name string
		f    store.AuditFilter
		want []int
	}{
		{"tenant", store.AuditFilter{Tenant: "a"}, []int{0, 2, 4}},
		{"action", store.AuditFilter{Action: "POST /v1/sandboxes"}, []int{0, 1, 3}},
		{"method", store.AuditFilter{Action: "DELETE"}, []int{2}},
		{"method is not a prefix match", store.AuditFilter{Action: "DEL"}, nil},
		{"target", store.AuditFilter{Target: "sbx_1"}, []int{0, 2}},
		{"since until", store.AuditFilter{Since: base.Add(time.Second), Until: base.Add(3 * time.Second)}, []int{1, 2}},
		{"status", store.AuditFilter{Status: 201}, []int{0}},
		{"class", store.AuditFilter{StatusClass: 4}, []int{1, 3, 4}},
		{"code", store.AuditFilter{Code: "quota_exceeded"}, []int{1}},
		{"after", store.AuditFilter{AfterSeq: in[2].Seq}, []int{3, 4}},
		{"before", store.AuditFilter{BeforeSeq: in[2].Seq}, []int{0, 1}},
		{"newest first", store.AuditFilter{Tenant: "a", Newest: true}, []int{4, 2, 0}},
		{"newest page before", store.AuditFilter{Newest: true, BeforeSeq: in[4].Seq, Limit: 2}, []int{3, 2}},
		{"limit", store.AuditFilter{Tenant: "a", Limit: 2}, []int{0, 2}},
	} {
		got, err := st.ListAudit(ctx, tc.f)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var idx []int
		for _, g := range got {
			for i, r := range in {
				if r.Seq == g.Seq {
					idx = append(idx, i)
				}
			}
		}
		if fmt.Sprint(idx) != fmt.Sprint(tc.want) {
			t.Errorf("%s: records %v, want %v", tc.name, idx, tc.want)
		}
	}

	// Page through everything while writers keep appending: every record
	// appended before the last page is seen exactly once.
	const writers, each = 4, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := st.AppendAudit(ctx, rec(100+w*each+i, "c", "POST /v1/x", "", 200, "")); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	seen := map[int64]int{}
	var cursor int64
	readPage := func() int {
		page, err := st.ListAudit(ctx, store.AuditFilter{AfterSeq: cursor, Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			seen[r.Seq]++
			cursor = r.Seq
		}
		return len(page)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			readPage()
		}
	}
	for readPage() > 0 {
	}
	final, _ := st.ListAudit(ctx, store.AuditFilter{})
	if len(final) != len(in)+writers*each || len(seen) != len(final) {
		t.Fatalf("paging saw %d distinct records of %d (want %d)", len(seen), len(final), len(in)+writers*each)
	}
	for seq, n := range seen {
		if n != 1 {
			t.Errorf("record %d seen %d times", seq, n)
		}
	}

	n, err := st.PruneAudit(ctx, base.Add(2*time.Second))
	if err != nil || n != 2 {
		t.Fatalf("prune: %d %v", n, err)
	}
	rest, _ := st.ListAudit(ctx, store.AuditFilter{Limit: 1})
	if len(rest) != 1 || rest[0].Seq != in[2].Seq {
		t.Fatalf("after prune the first record is %+v, want seq %d", rest, in[2].Seq)
	}
	if _, err := st.ListAudit(ctx, store.AuditFilter{Limit: -1}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("negative limit: %v", err)
	}
}
