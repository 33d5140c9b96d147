package httpapi

import (
	"testing"
	"time"
)

func TestTerminalTicketExpiry(t *testing.T) {
	t.Parallel()
	var tt terminalTickets
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	key := [32]byte{1}
	a, exp, err := tt.issue(key, "sbx_a", now)
	if err != nil || !exp.Equal(now.Add(terminalTicketTTL)) {
		t.Fatalf("issue: %v %v", exp, err)
	}
	b, _, _ := tt.issue(key, "sbx_a", now)
	if a == b {
		t.Fatal("two tickets are equal")
	}
	if _, ok := tt.redeem(a, "sbx_a", exp); ok {
		t.Error("redeemed at its expiry")
	}
	if got, ok := tt.redeem(b, "sbx_a", exp.Add(-time.Nanosecond)); !ok || got != key {
		t.Errorf("redeem just before expiry: %v %v", got, ok)
	}
	// Expired tickets are pruned by the next issue.
	_, _, _ = tt.issue(key, "sbx_a", now)
	_, _, _ = tt.issue(key, "sbx_a", exp.Add(time.Second))
	if n := len(tt.m); n != 1 {
		t.Errorf("%d tickets kept, want 1 (the expired one pruned)", n)
	}
}
