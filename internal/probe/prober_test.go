package probe

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/driver/fake"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/imagestate"
)

func newProber(t *testing.T, d *fake.Driver) *Prober {
	t.Helper()
	p, err := New(Config{Driver: d, Settings: &config.Config{}, Images: imagestate.New("", d, nil)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestProberCachesAndKeepsThroughBlips: Result probes once and then
// answers the cache; Refresh probes again, and a runtime that passed
// before and only missed its deadline still reads healthy.
func TestProberCachesAndKeepsThroughBlips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := fake.New(fake.Config{})
	p := newProber(t, d)
	if res := p.Result(ctx); !res.Healthy || len(res.Runtimes) != 2 {
		t.Fatalf("first result: %+v; want the fake's healthy probe", res)
	}
	d.SetProbeResult(probeOf(false, true))
	if res := p.Result(ctx); !res.Runtimes[0].Healthy {
		t.Fatalf("Result probed again instead of answering the cache: %+v", res)
	}
	res := p.Refresh(ctx)
	if !res.Runtimes[0].Healthy || !strings.Contains(res.Runtimes[0].Error, "1 of 2 tolerated") {
		t.Fatalf("refresh after one missed deadline: %+v; want runc kept healthy with the failure shown", res)
	}
	if got := p.Result(ctx); got.Runtimes[0].Error != res.Runtimes[0].Error {
		t.Fatalf("Result after Refresh: %+v; want the refreshed result", got)
	}
}

// TestProberNewAndDiskQuota: New refuses a missing part; without a
// sandboxer that reports quotas none are enforced, and the status says why.
func TestProberNewAndDiskQuota(t *testing.T) {
	t.Parallel()
	d := fake.New(fake.Config{})
	if _, err := New(Config{Settings: &config.Config{}, Images: imagestate.New("", d, nil)}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("New without a driver: %v; want invalid argument", err)
	}
	p := newProber(t, d)
	st := p.DiskQuota(context.Background())
	if st.Enforced || !strings.Contains(st.Reason, "has no workspace quotas") {
		t.Fatalf("disk quota without a quota reporter: %+v; want not enforced, with the reason", st)
	}
}

// TestProberRunEndsWithItsContext: Run returns once its context ends.
func TestProberRunEndsWithItsContext(t *testing.T) {
	t.Parallel()
	p := newProber(t, fake.New(fake.Config{Probe: &driver.ProbeResult{}}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx, time.Hour); close(done) }()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
