package jobs_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
)

// TestWait: Wait returns a background job's final record as soon as it
// ends (to every waiter), returns at once for a finished job (a
// synchronous exec's too), answers ctx's error when ctx ends first and
// not found for another tenant's job or a bad id.
func TestWait(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	sb := h.Create("a", control.CreateSandboxInput{})

	j, err := h.Jobs.StartJob(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID, Command: []string{"sh", "-c", "sleep 0.5; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	// A waiter whose ctx ends first gets ctx's error, and the job runs on.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := h.Jobs.Wait(short, "a", j.ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait with a short deadline: %v, want deadline exceeded", err)
	}
	var wg sync.WaitGroup
	got := make([]*sandbox.Job, 3)
	errs := make([]error, 3)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			got[i], errs[i] = h.Jobs.Wait(wctx, "a", j.ID)
		}()
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil {
			t.Fatalf("waiter %d: %v", i, errs[i])
		}
		if !got[i].State.Final() || got[i].ExitCode == nil || *got[i].ExitCode != 3 {
			t.Fatalf("waiter %d: state %s, exit %v; want a final state with exit code 3", i, got[i].State, got[i].ExitCode)
		}
	}

	// Finished already: at once, even with a context that has ended.
	done, cancelDone := context.WithCancel(ctx)
	cancelDone()
	if _, err := h.Jobs.Wait(done, "a", j.ID); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait for a finished job: %v", err)
	}
	if f, err := h.Jobs.Wait(ctx, "a", j.ID); err != nil || f.ID != j.ID || !f.State.Final() {
		t.Fatalf("Wait for a finished job: %v, %v", f, err)
	}
	out, err := h.Jobs.Exec(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID, Command: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if f, err := h.Jobs.Wait(ctx, "a", out.Job.ID); err != nil || f.State != sandbox.JobSucceeded {
		t.Fatalf("Wait for a synchronous exec's job: %v, %v", f, err)
	}

	// Another tenant's job and ids that are no job's.
	for _, c := range []struct{ tenant, id string }{{"b", j.ID}, {"a", "job_nosuchjob"}, {"a", "desktop-launch-1"}} {
		if _, err := h.Jobs.Wait(ctx, c.tenant, c.id); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("Wait(%s, %s): %v, want not found", c.tenant, c.id, err)
		}
	}
}

// TestWaitCanceled: a canceled job's waiter wakes with its canceled
// record.
func TestWaitCanceled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	sb := h.Create("a", control.CreateSandboxInput{})
	j, err := h.Jobs.StartJob(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID, Command: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		j   *sandbox.Job
		err error
	}
	res := make(chan result, 1)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	go func() {
		j, err := h.Jobs.Wait(wctx, "a", j.ID)
		res <- result{j, err}
	}()
	if _, err := h.Jobs.CancelJob(ctx, "a", j.ID); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.err != nil || r.j.State != sandbox.JobCanceled {
		t.Fatalf("Wait for a canceled job: %+v, %v; want canceled", r.j, r.err)
	}
}
