package control

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/admission"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// newAdmission builds the admission controller from the capacity config,
// deriving unset totals from this host, or, when sandboxes run elsewhere
// (remote: a cluster's nodes, whose scheduler places them and refuses what
// fits no node), from the sandbox count alone: as many sandboxes at their
// largest limits as capacity.sandboxes allows.
func newAdmission(cfg *config.Config, remote bool, now func() time.Time, weight func(context.Context, string) int) (*admission.Controller, error) {
	cpu, mem, n := cfg.Capacity.Totals(cfg.Limits, runtime.NumCPU(), hostMemoryMB())
	if remote {
		if cfg.Capacity.CPU == 0 {
			cpu = float64(n) * cfg.Limits.MaxCPU
		}
		if cfg.Capacity.MemoryMB == 0 {
			mem = int64(n) * cfg.Limits.MaxMemoryMB
		}
	}
	return admission.New(admission.Config{
		Capacity: admission.Capacity{CPU: cpu, MemoryMB: mem, Sandboxes: n},
		Weight:   weight,
		Now:      now,
	})
}

// tenantWeight is a tenant's weight in the fair queues, from its record (the
// config's tenants are synced into the store at start), so a changed weight
// counts from the tenant's next wait on.
func (s *Service) tenantWeight(ctx context.Context, name string) int {
	t, err := s.tenantRecord(ctx, name)
	if err != nil {
		s.log.Warn("tenant weight unknown; using 1", "tenant", name, "err", err)
		return 1
	}
	return t.Weight
}

// hostMemoryMB reads MemTotal from /proc/meminfo; 0 when unknown.
func hostMemoryMB() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb / 1024
		}
	}
	return 0
}

// admit waits, up to wait, for host capacity for one sandbox with resources
// res of tenant, in the tenant's fair queue. The caller must call release if
// the sandbox is not made, or hand it to holdCapacity once its record exists.
func (s *Service) admit(ctx context.Context, tenant string, res sandbox.Resources, wait time.Duration) (release func(), err error) {
	return s.admission.Acquire(ctx, tenant, res, wait)
}

// waitDuration validates a request's wait_seconds.
func (s *Service) waitDuration(seconds int64) (time.Duration, error) {
	if seconds < 0 || seconds > s.cfg.Capacity.MaxWaitSeconds {
		return 0, invalid("wait_seconds must be between 0 and %d, got %d", s.cfg.Capacity.MaxWaitSeconds, seconds)
	}
	return time.Duration(seconds) * time.Second, nil
}

// holdCapacity ties capacity taken by admit to the sandbox id; it is given
// back by releaseCapacity when the sandbox ends.
func (s *Service) holdCapacity(id string, release func()) { s.capacity.Hold(id, release) }

// releaseCapacity gives back what sandbox id holds (nothing if it holds
// nothing).
func (s *Service) releaseCapacity(id string) { s.capacity.Release(id) }

// adoptCapacity accounts for the live sandboxes of this instance found at
// start-up (they may exceed the capacity if it was lowered).
func (s *Service) adoptCapacity(ctx context.Context) error {
	containers, err := s.driver.List(ctx)
	if err != nil {
		return fmt.Errorf("listing containers: %w", err)
	}
	ours := map[string]bool{}
	for _, c := range containers {
		if c.Labels[driver.LabelInstance] == s.instance {
			ours[c.Labels[driver.LabelSandbox]] = true
		}
	}
	live, err := s.store.ListSandboxes(ctx, store.SandboxFilter{States: liveStates})
	if err != nil {
		return err
	}
	n := 0
	for _, sb := range live {
		if ours[sb.ID] {
			s.holdCapacity(sb.ID, s.admission.Reserve(sb.Tenant, sb.Resources))
			n++
		}
	}
	if n > 0 {
		s.log.Info("accounted host capacity of adopted sandboxes", "sandboxes", n)
	}
	return nil
}

// AdmissionStats returns the host capacity in use and the fair queues'
// counters (for /metrics).
func (s *Service) AdmissionStats() admission.Stats { return s.admission.Stats() }
