package probe

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/imagestate"
)

// Config wires a Prober.
type Config struct {
	// Driver is probed, and asked about the profiles' images.
	Driver driver.Driver
	// Sandboxer places the sandboxes; it says whether workspace quotas
	// are possible (driver.QuotaReporter). Nil: they are not.
	Sandboxer driver.Sandboxer
	// Settings are the configured profiles and warm_pools.
	Settings *config.Config
	// Images resolves the profiles' images and their background builds.
	Images *imagestate.Images
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Prober runs the driver's capability probe and caches its result.
type Prober struct {
	driver driver.Driver
	boxes  driver.Sandboxer
	cfg    *config.Config
	images *imagestate.Images
	log    *slog.Logger
	now    func() time.Time

	runMu sync.Mutex // serializes probe runs
	mu    sync.RWMutex
	res   driver.ProbeResult
	ok    bool
	// retries counts the probes in a row that found something unhealthy
	// (next; under mu).
	retries uint
	// fails counts failed probes in a row of runtimes that passed before
	// (see keepThroughBlips); under mu.
	fails map[string]int
}

// New validates cfg and returns a Prober. It has no side effects.
func New(cfg Config) (*Prober, error) {
	switch {
	case cfg.Driver == nil:
		return nil, fmt.Errorf("probe: nil driver: %w", errdefs.ErrInvalidArgument)
	case cfg.Settings == nil:
		return nil, fmt.Errorf("probe: nil settings: %w", errdefs.ErrInvalidArgument)
	case cfg.Images == nil:
		return nil, fmt.Errorf("probe: nil images: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Prober{driver: cfg.Driver, boxes: cfg.Sandboxer, cfg: cfg.Settings, images: cfg.Images, log: cfg.Logger, now: cfg.Now}, nil
}

// Refresh runs the driver's capability probe now and caches the result.
func (p *Prober) Refresh(ctx context.Context) driver.ProbeResult {
	p.runMu.Lock()
	defer p.runMu.Unlock()
	res, err := p.driver.Probe(ctx)
	if err != nil {
		res = driver.ProbeResult{Driver: p.driver.Name(), Healthy: false, Error: err.Error(), CheckedAt: p.now()}
	}
	p.mu.Lock()
	if p.ok {
		p.fails = keepThroughBlips(&res, p.res, p.fails)
	}
	p.res, p.ok = res, true
	p.mu.Unlock()
	attrs := []any{"healthy", res.Healthy, "daemon", res.DaemonVersion, "cgroup", res.CgroupVersion}
	for _, r := range res.Runtimes {
		attrs = append(attrs, r.Name, fmt.Sprintf("healthy=%v %s %s", r.Healthy, r.Version, r.Error))
	}
	p.log.Info("capability probe", attrs...)
	return res
}

// probeBlips is how many probes in a row a runtime that passed before may
// fail before it is reported unhealthy. A smoke run that misses its deadline
// on a heavily loaded host says little about the runtime; refusing every
// create because of one would turn load into an outage.
const probeBlips = 2

// keepThroughBlips reports a runtime that was healthy in prev and whose
// smoke run in res only missed its deadline as still healthy while its run
// of such failed probes (counted in fails, which it
// returns updated) is at most probeBlips long. The failure stays visible in
// the runtime's error.
func keepThroughBlips(res *driver.ProbeResult, prev driver.ProbeResult, fails map[string]int) map[string]int {
	was := map[string]bool{}
	for _, r := range prev.Runtimes {
		was[r.Name] = r.Healthy
	}
	next := map[string]int{}
	for i := range res.Runtimes {
		r := &res.Runtimes[i]
		if r.Healthy || !r.TimedOut || !was[r.Name] {
			continue
		}
		n := fails[r.Name] + 1
		if n > probeBlips {
			continue
		}
		next[r.Name] = n
		r.Healthy = true
		r.Error = fmt.Sprintf("last probe failed (%d of %d tolerated): %s", n, probeBlips, r.Error)
		res.Healthy = true
		res.Error = ""
	}
	return next
}

// Run re-runs the probe every interval, and every few seconds while some
// runtime is unhealthy, so a host that was busy at start-up becomes ready
// soon after it calms down. It returns when ctx ends.
func (p *Prober) Run(ctx context.Context, interval time.Duration) {
	const retry = 10 * time.Second
	t := time.NewTimer(p.next(interval, retry))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.Refresh(ctx)
			t.Reset(p.next(interval, retry))
		}
	}
}

// next is the time to the next probe: interval while everything is
// healthy; after a probe that found something unhealthy, retry, doubled
// for each such probe in a row, up to interval. A runtime that stays
// broken (gVisor on a node that cannot run it, where every probe makes
// a smoke Pod) is so looked at less and less often, and one that breaks
// now is looked at again soon.
func (p *Prober) next(interval, retry time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	res := p.res
	unhealthy := !res.Healthy
	for _, r := range res.Runtimes {
		if !r.Healthy || strings.HasPrefix(r.Error, "last probe failed") {
			unhealthy = true
		}
	}
	if !unhealthy {
		p.retries = 0
		return interval
	}
	d := retry << min(p.retries, 16)
	p.retries++
	return min(interval, d)
}

// Result returns the cached probe result, probing first if there is none.
func (p *Prober) Result(ctx context.Context) driver.ProbeResult {
	p.mu.RLock()
	res, ok := p.res, p.ok
	p.mu.RUnlock()
	if ok {
		return res
	}
	return p.Refresh(ctx)
}
