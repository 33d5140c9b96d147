package jobs_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
)

// freePort returns a loopback port nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestWaitReady: the one readiness wait. For a profile service's ready
// port it waits for the service's ready state (unavailable while the port
// is closed); for any other port it dials until a connect succeeds; a
// job that is to listen and ends first fails the wait with code
// job_ended, at once.
func TestWaitReady(t *testing.T) {
	t.Parallel()
	svcPort, otherPort := freePort(t), freePort(t)
	h := newHarness(t, func(c *config.Config) {
		p, _ := c.Profile(controltest.Profile)
		p.Services = []config.ServiceSpec{{Name: "web", Command: []string{"sleep", "1000"}, ReadyPort: svcPort}}
	})
	ctx := context.Background()
	sb := h.Create("a", control.CreateSandboxInput{})

	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		t.Cleanup(cancel)
		return c
	}
	if err := h.Services.WaitReady(short(), sb.ID, svcPort); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("WaitReady on a closed service port: %v, want unavailable", err)
	}
	if err := h.Services.WaitReady(short(), sb.ID, otherPort); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("WaitReady on a closed port: %v, want unavailable", err)
	}

	// A job that is to listen and exits: job_ended, long before ctx ends.
	j, err := h.Jobs.StartJob(ctx, jobs.ExecInput{Tenant: "a", SandboxID: sb.ID, Command: []string{"sh", "-c", "sleep 0.2; exit 2"}})
	if err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	err = h.Services.WaitListening(lctx, sb.ID, j.ID, otherPort)
	if errdefs.Code(err) != jobs.CodeJobEnded || !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("WaitListening for a job that exits: %v, want code %s", err, jobs.CodeJobEnded)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("WaitListening noticed the job's end after %v", d)
	}

	// Both ports answer once something listens on them.
	for _, p := range []int{svcPort, otherPort} {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = h.Services.WaitReady(wctx, sb.ID, p)
		cancel()
		if err != nil {
			t.Fatalf("WaitReady on port %d, listening: %v", p, err)
		}
	}
	if st := h.Services.Of(sb.ID); len(st) != 1 || st[0].State != "ready" {
		t.Errorf("the service's state once WaitReady returned: %+v, want ready", st)
	}
}
