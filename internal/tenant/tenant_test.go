package tenant

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

func TestQuotasExceeded(t *testing.T) {
	t.Parallel()
	q := Quotas{MaxSandboxes: 2, MaxCPU: 0.3, MaxMemoryMB: 1024, MaxLeases: 1}
	small := sandbox.Resources{CPU: 0.1, MemoryMB: 256}
	tests := []struct {
		name  string
		usage Usage
		add   sandbox.Resources
		lease bool
		want  string // prefix of the violation, "" if it fits
	}{
		{"empty", Usage{}, small, false, ""},
		{"float sums fit", Usage{Sandboxes: 1, CPU: 0.2}, small, false, ""},
		{"sandboxes", Usage{Sandboxes: 2}, small, false, "max_sandboxes"},
		{"cpu", Usage{Sandboxes: 1, CPU: 0.25}, small, false, "max_cpu"},
		{"memory", Usage{MemoryMB: 800}, small, false, "max_memory_mb"},
		{"lease", Usage{Leases: 1}, small, true, "max_leases"},
		{"lease not asked", Usage{Leases: 1}, small, false, ""},
	}
	for _, tc := range tests {
		got := q.Exceeded(tc.usage.Add(tc.add, tc.lease))
		if (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: Exceeded = %q, want prefix %q", tc.name, got, tc.want)
		}
	}
	if got := (Quotas{}).Exceeded(Usage{Sandboxes: 1 << 20, CPU: 1e9, MemoryMB: 1 << 40, Leases: 1 << 20}); got != "" {
		t.Errorf("zero quotas limit: %q", got)
	}
}

func TestQuotasValidateNamesKey(t *testing.T) {
	t.Parallel()
	err := Quotas{MaxMemoryMB: -1}.Validate("tenants.x.quotas")
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "tenants.x.quotas.max_memory_mb") {
		t.Fatalf("got %v", err)
	}
}

func TestNewKey(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	k, secret, err := NewKey(rand.Reader, "acme", "ci", now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, KeyPrefix) || len(secret) != len(KeyPrefix)+64 {
		t.Fatalf("secret %q: want gsk_ and 64 hex digits", secret)
	}
	if !strings.HasPrefix(secret, k.Prefix) || len(k.Prefix) != 12 || !strings.HasPrefix(k.ID, "key_") || k.Tenant != "acme" {
		t.Fatalf("key %+v", k)
	}
	if !k.Matches(HashKey(secret)) || k.Matches(HashKey(secret+"x")) {
		t.Fatal("hash does not identify the secret")
	}
	k2, secret2, _ := NewKey(rand.Reader, "acme", "", now)
	if secret2 == secret || k2.ID == k.ID {
		t.Fatal("two keys are equal")
	}
	if _, _, err := NewKey(bytes.NewReader(nil), "acme", "", now); !errors.Is(err, errdefs.ErrInternal) {
		t.Fatalf("short randomness: %v", err)
	}
}

func TestTenantValidate(t *testing.T) {
	t.Parallel()
	for _, bad := range []Tenant{{Name: "Bad"}, {Name: ""}, {Name: "a", Weight: -1}, {Name: "a", MinRiskLevel: "meh"}, {Name: "a", Quotas: Quotas{MaxLeases: -1}}} {
		if err := bad.Validate(); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if err := (&Tenant{Name: "ok-1", Weight: 3, MinRiskLevel: "high"}).Validate(); err != nil {
		t.Error(err)
	}
}

// TestUsageOf: every live sandbox counts its resources, a leased or busy
// one a lease too, and the first to expire is returned.
func TestUsageOf(t *testing.T) {
	t.Parallel()
	at := func(s int64) *time.Time { v := time.Unix(1_800_000_000+s, 0); return &v }
	live := []*sandbox.Sandbox{
		{ID: "sb_ready", State: sandbox.StateReady, Resources: sandbox.Resources{CPU: 0.5, MemoryMB: 256}, ExpiresAt: at(30)},
		{ID: "sb_leased", State: sandbox.StateLeased, Resources: sandbox.Resources{CPU: 1, MemoryMB: 512}, ExpiresAt: at(10)},
		{ID: "sb_busy", State: sandbox.StateBusy, Resources: sandbox.Resources{CPU: 0.25, MemoryMB: 128}},
	}
	u, first := UsageOf(live)
	if want := (Usage{Sandboxes: 3, CPU: 1.75, MemoryMB: 896, Leases: 2}); u != want {
		t.Errorf("UsageOf = %+v, want %+v", u, want)
	}
	if first.ID != "sb_leased" {
		t.Errorf("first to expire: %q, want sb_leased", first.ID)
	}
	if u, first := UsageOf(live[2:]); u.Sandboxes != 1 || first.ExpiresAt != nil {
		t.Errorf("UsageOf(one without expiry) = %+v, first %+v; want one sandbox and no expiry", u, first)
	}
}

func TestQuotasVolumeLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		q         Quotas
		ceilCount int
		ceilMB    int64
		wantCount int
		wantMB    int64
	}{
		{"neither", Quotas{}, 0, 0, 0, 0},
		{"ceiling only", Quotas{}, 100, 2048, 100, 2048},
		{"tenant only", Quotas{MaxVolumes: 3, MaxVolumeMB: 512}, 0, 0, 3, 512},
		{"tenant narrows", Quotas{MaxVolumes: 3, MaxVolumeMB: 512}, 100, 2048, 3, 512},
		{"tenant cannot widen", Quotas{MaxVolumes: 300, MaxVolumeMB: 4096}, 100, 2048, 100, 2048},
		{"mixed", Quotas{MaxVolumeMB: 4096}, 5, 2048, 5, 2048},
	}
	for _, tc := range tests {
		n, mb := tc.q.VolumeLimits(tc.ceilCount, tc.ceilMB)
		if n != tc.wantCount || mb != tc.wantMB {
			t.Errorf("%s: VolumeLimits = %d, %d; want %d, %d", tc.name, n, mb, tc.wantCount, tc.wantMB)
		}
	}
	for _, q := range []Quotas{{MaxVolumes: -1}, {MaxVolumeMB: -1}} {
		if err := q.Validate("quotas"); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Validate(%+v) = %v, want invalid argument", q, err)
		}
	}
}
