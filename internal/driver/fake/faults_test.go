package fake_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/driver/fake"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

func TestFaults(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := fake.New(fake.Config{Images: []string{"img"}})
	boom := errors.New("boom")
	d.SetFaults(fake.Faults{Create: boom})
	if _, err := d.Create(ctx, driver.Spec{Image: "img"}); !errors.Is(err, boom) {
		t.Fatalf("Create with fault: %v; want boom", err)
	}
	d.SetFaults(fake.Faults{Start: boom})
	id, err := d.Create(ctx, driver.Spec{Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx, id); !errors.Is(err, boom) {
		t.Fatalf("Start with fault: %v", err)
	}
	if st, _ := d.Inspect(ctx, id); st.Running {
		t.Error("failed Start changed state")
	}
	d.SetFaults(fake.Faults{})
	if err := d.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if d.Calls(fake.OpStart) != 2 || d.Calls(fake.OpCreate) != 2 {
		t.Errorf("calls start %d create %d; want 2 and 2", d.Calls(fake.OpStart), d.Calls(fake.OpCreate))
	}
}

func TestExitAndSpec(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	d := fake.New(fake.Config{Images: []string{"img"}})
	spec := driver.Spec{Image: "img", Runtime: sandbox.RuntimeRunsc, Cmd: []string{"a"}}
	id, _ := d.Create(ctx, spec)
	_ = d.Start(ctx, id)
	if err := d.Exit(id, 137, true); err != nil {
		t.Fatal(err)
	}
	st, _ := d.Inspect(ctx, id)
	if st.Running || st.ExitCode != 137 || !st.OOMKilled || st.State != "exited" || st.Runtime != "runsc" {
		t.Errorf("after Exit: %+v", st)
	}
	if got, ok := d.Spec(id); !ok || got.Cmd[0] != "a" {
		t.Errorf("Spec = %+v, %v", got, ok)
	}
	if err := d.Exit("nope", 0, false); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Exit of missing: %v", err)
	}
}

func TestUnknownRuntimeAndContext(t *testing.T) {
	t.Parallel()
	d := fake.New(fake.Config{Images: []string{"img"}, Runtimes: []sandbox.Runtime{sandbox.RuntimeRunc}})
	_, err := d.Create(t.Context(), driver.Spec{Image: "img", Runtime: sandbox.RuntimeRunsc})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || errdefs.Code(err) != "runtime_unavailable" {
		t.Errorf("Create with unregistered runtime: %v", err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := d.List(ctx); !errors.Is(err, errdefs.ErrDeadlineExceeded) {
		t.Errorf("List with expired ctx: %v", err)
	}
}

func TestHookAndProbe(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	d := fake.New(fake.Config{Images: []string{"img"}, Hook: func(ctx context.Context, op fake.Op, id string) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, string(op)+":"+id)
		if op == fake.OpRemove && id == "blocked" {
			return errdefs.ErrUnavailable
		}
		return nil
	}})
	if err := d.Remove(t.Context(), "blocked"); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Remove via hook: %v", err)
	}
	p, err := d.Probe(t.Context())
	if err != nil || !p.Healthy || len(p.HealthyRuntimes()) != 2 {
		t.Errorf("default probe = %+v, %v", p, err)
	}
	if ri, _ := p.Runtime(sandbox.RuntimeRunsc); !strings.Contains(ri.Version, "gvisor") {
		t.Errorf("runsc version %q", ri.Version)
	}
	d.SetProbeResult(driver.ProbeResult{Driver: "fake", Error: "down"})
	if p, _ := d.Probe(t.Context()); p.Healthy || p.Error != "down" {
		t.Errorf("set probe = %+v", p)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ",") != "remove:blocked,probe:,probe:" {
		t.Errorf("hook saw %v", seen)
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	d := fake.New(fake.Config{Images: []string{"img"}})
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			ctx := context.Background()
			id, err := d.Create(ctx, driver.Spec{Image: "img"})
			if err != nil {
				t.Error(err)
				return
			}
			_ = d.Start(ctx, id)
			_, _ = d.List(ctx)
			_ = d.Remove(ctx, id)
		})
	}
	wg.Wait()
	if l, _ := d.List(t.Context()); len(l) != 0 {
		t.Errorf("%d containers left", len(l))
	}
}
