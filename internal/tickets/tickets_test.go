package tickets

import (
	"errors"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
)

func TestTicketExpiry(t *testing.T) {
	t.Parallel()
	var tt Table
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	key := [32]byte{1}
	p := "a"
	a, exp, err := tt.Issue(p, key, "sbx_a", now)
	if err != nil || !exp.Equal(now.Add(TTL)) {
		t.Fatalf("issue: %v %v", exp, err)
	}
	b, _, _ := tt.Issue(p, key, "sbx_a", now)
	if a == b {
		t.Fatal("two tickets are equal")
	}
	if _, ok := tt.Redeem(a, "sbx_a", exp); ok {
		t.Error("redeemed at its expiry")
	}
	if got, ok := tt.Redeem(b, "sbx_a", exp.Add(-time.Nanosecond)); !ok || got.Key != key || got.Tenant != "a" {
		t.Errorf("redeem just before expiry: %+v %v", got, ok)
	}
	// Expired tickets are pruned by the next issue.
	_, _, _ = tt.Issue(p, key, "sbx_a", now)
	_, _, _ = tt.Issue(p, key, "sbx_a", exp.Add(time.Second))
	if n := len(tt.m); n != 1 || tt.byTenant["a"] != 1 {
		t.Errorf("%d tickets kept (%v by tenant), want 1 (the expired one pruned)", n, tt.byTenant)
	}
}

// TestTicketCaps: a tenant at its cap is refused (429, a stable
// code, Retry-After until its oldest ticket expires) while others still get
// tickets, also when the whole table is full: the tenant holding the most
// gives way, never the one asking.
func TestTicketCaps(t *testing.T) {
	t.Parallel()
	tt := Table{Max: 6, PerTenant: 3}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	as := func(name string) string { return name }
	issue := func(who string, at time.Time) error {
		_, _, err := tt.Issue(as(who), [32]byte{byte(len(who))}, "sbx_"+who, at)
		return err
	}
	for i := range 3 {
		if err := issue("hog", now.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatalf("hog ticket %d: %v", i, err)
		}
	}
	err := issue("hog", now.Add(5*time.Second))
	if !errors.Is(err, errdefs.ErrResourceExhausted) || errdefs.Code(err) != "too_many_tickets" || errdefs.HTTPStatus(err) != 429 {
		t.Fatalf("hog over its cap: %v (code %q)", err, errdefs.Code(err))
	}
	// The oldest of its tickets was issued at now: it expires in 25 s.
	if after, ok := errdefs.RetryAfter(err); !ok || after != TTL-5*time.Second {
		t.Errorf("Retry-After %v %v, want %v", after, ok, TTL-5*time.Second)
	}
	// Others are not affected: fill the table with two more tenants.
	for _, who := range []string{"b", "c", "c"} {
		if err := issue(who, now.Add(6*time.Second)); err != nil {
			t.Fatalf("%s beside a hog: %v", who, err)
		}
	}
	if len(tt.m) != 6 {
		t.Fatalf("%d tickets, want a full table of 6", len(tt.m))
	}
	// The table is full: a new tenant still gets one, and the hog (the
	// largest holder) loses its oldest.
	if err := issue("d", now.Add(7*time.Second)); err != nil {
		t.Fatalf("d with a full table: %v", err)
	}
	if tt.byTenant["hog"] != 2 || tt.byTenant["d"] != 1 || len(tt.m) != 6 {
		t.Fatalf("after d: %v", tt.byTenant)
	}
	// A tenant that is itself the largest holder of a full table is
	// refused; until then another gives way (c and hog hold 2 each: the
	// first by name, c).
	tt.PerTenant = 10
	if err := issue("hog", now.Add(8*time.Second)); err != nil || tt.byTenant["c"] != 1 || tt.byTenant["hog"] != 3 {
		t.Fatalf("hog with a larger cap: %v %v", err, tt.byTenant)
	}
	if err := issue("hog", now.Add(8*time.Second)); errdefs.Code(err) != "too_many_tickets" {
		t.Errorf("the largest holder of a full table: %v", err)
	}
	total := 0
	for _, n := range tt.byTenant {
		total += n
	}
	if total != len(tt.m) {
		t.Errorf("counts %v do not add up to %d tickets", tt.byTenant, len(tt.m))
	}
	// Redeeming gives the tenant's share back.
	tt.PerTenant = 3
	tok, _, err := tt.Issue(as("e"), [32]byte{9}, "sbx_e", now.Add(9*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tt.Redeem(tok, "sbx_e", now.Add(10*time.Second)); !ok || tt.byTenant["e"] != 0 {
		t.Errorf("redeem: %v, counts %v", ok, tt.byTenant)
	}
}
