package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/store/pgtest"
	"genesis.dev/sandbox/internal/store/postgres"
)

// poolConfig is a service config with only tool-basic, warm under runc and
// runsc with minIdle members each; extra is laid over it.
func poolConfig(minIdle, maxTotal int, drain time.Duration, extra string) string {
	return fmt.Sprintf(`warm_pools: true
intervals: {pool_check: 2s, reconcile: 2s, drain_timeout: %[3]s}
profiles:
  - name: tool-basic
    recipe: tool-basic
    allowed_runtimes: [runc, runsc]
    default_risk_level: low
    resources: {cpu: 0.5, memory_mb: 256, pids: 128}
    network: none
    user: "1000:1000"
    pools: [{runtime: runc, min_idle: %[1]d, max_total: %[2]d}, {runtime: runsc, min_idle: %[1]d, max_total: %[2]d}]
    lease: {default_ttl_seconds: 300, max_ttl_seconds: 600}
`, minIdle, maxTotal, drain) + extra
}

// waitPool polls GET /v1/pools until pool name holds idle idle members.
func waitPool(t *testing.T, c *client.Client, name string, idle int) client.Pool {
	t.Helper()
	var last client.Pool
	eventually(t, 2*time.Minute, "pool "+name+" warm", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		pl, err := c.Pools(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pl.Items {
			if p.Name == name {
				last = p
				return p.Counts["idle"] >= idle && p.Starting == 0, fmt.Sprintf("%+v", p)
			}
		}
		return false, "no such pool"
	})
	return last
}

// TestLeaseWarmPool, under runc and runsc: a lease through the CLI is served
// warm from the pool, the claim's env reaches jobs without a restart, the
// sandbox is busy while a job runs, the pool refills, and a release cancels
// the job and removes the container.
func TestLeaseWarmPool(t *testing.T) {
	t.Parallel()
	e := newEnv(t, poolConfig(1, 3, 20*time.Second, ""))
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			pool := "tool-basic-" + rt
			waitPool(t, c, pool, 1)
			r := svc.cli(t, "lease", "acquire", "--profile", "tool-basic", "--runtime", rt, "--ttl", "5m",
				"--holder", "e2e", "--env", "LEASE_VAR=warm-"+rt)
			if r.code != 0 {
				t.Fatalf("%s", r)
			}
			ids := strings.Fields(r.stdout)
			if len(ids) != 2 || !sandbox.ValidID("lse", ids[0]) || !sandbox.ValidID("sbx", ids[1]) {
				t.Fatalf("acquire printed %q", r.stdout)
			}
			leaseID, sbID := ids[0], ids[1]
			l, err := c.GetLease(ctx, leaseID)
			if err != nil || !l.Warm || l.State != "active" || l.SandboxID != sbID || l.Runtime != rt {
				t.Fatalf("lease %+v %v; want active, warm, %s", l, err, rt)
			}
			res := execOK(t, c, sbID, `echo "$LEASE_VAR"; uname -r`)
			out := strings.Split(strings.TrimSpace(res.Stdout), "\n")
			if len(out) != 2 || out[0] != "warm-"+rt || (rt == "runsc") != strings.Contains(out[1], "gvisor") {
				t.Fatalf("exec in the leased sandbox: %q", res.Stdout)
			}
			job, err := c.StartJob(ctx, sbID, client.ExecRequest{Command: []string{"sleep", "120"}})
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, "sandbox busy while the job runs", func() (bool, string) {
				sb, err := c.GetSandbox(ctx, sbID)
				return err == nil && sb.State == "busy", fmt.Sprint(sb, err)
			})
			p := waitPool(t, c, pool, 1) // refilled after the claim
			if p.Hits < 1 {
				t.Errorf("pool %s after a warm lease: %+v", pool, p)
			}
			if r := svc.cli(t, "lease", "release", leaseID); r.code != 0 {
				t.Fatalf("%s", r)
			}
			// The release answers before the destroy, which follows at once.
			eventually(t, 2*time.Minute, "the released lease's sandbox destroyed", func() (bool, string) {
				left := sandboxContainers(t, sbID)
				return len(left) == 0, fmt.Sprintf("containers of %s after release: %v", sbID, left)
			})
			eventually(t, 30*time.Second, "the job of the released lease ends", func() (bool, string) {
				j, err := c.GetJob(ctx, job.ID)
				return err == nil && j.State != "running", fmt.Sprint(j, err)
			})
			l, _ = c.GetLease(ctx, leaseID)
			if l.State != "released" {
				t.Errorf("lease after release: %+v", l)
			}
			var apiErr *client.APIError
			if _, err := c.RenewLease(ctx, leaseID, nil); !errors.As(err, &apiErr) || apiErr.Problem.Code != "lease_released" {
				t.Errorf("renew of a released lease: %v", err)
			}
			if r := svc.cli(t, "pool", "ls"); r.code != 0 || !strings.Contains(r.stdout, pool) {
				t.Errorf("pool ls: %s", r)
			}
		})
	}
}

// TestLeaseDrainOnSIGTERM, under runc and runsc: with active leases and a
// running job, SIGTERM makes the service refuse new leases (503
// service_draining), wait drain_timeout for the leases, then destroy
// everything of its instance and exit.
func TestLeaseDrainOnSIGTERM(t *testing.T) {
	t.Parallel()
	const drain = 4 * time.Second
	e := newEnv(t, poolConfig(1, 2, drain, ""))
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, rt := range e.runtimes(t) {
		waitPool(t, c, "tool-basic-"+rt, 1)
		l, err := c.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "tool-basic", Runtime: rt})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.StartJob(ctx, l.SandboxID, client.ExecRequest{Command: []string{"sleep", "300"}}); err != nil {
			t.Fatal(err)
		}
	}
	sent := time.Now()
	if err := svc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "new leases refused while draining", func() (bool, string) {
		_, err := c.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "tool-basic"})
		var apiErr *client.APIError
		return errors.As(err, &apiErr) && apiErr.Status == 503 && apiErr.Problem.Code == "service_draining", fmt.Sprint(err)
	})
	select {
	case <-svc.done:
	case <-time.After(drain + 2*time.Minute):
		t.Fatal("the service did not exit after the drain deadline")
	}
	if took := time.Since(sent); took < drain {
		t.Errorf("the service exited %v after SIGTERM, before the drain deadline %v with leases active", took, drain)
	}
	if left := containers(t, "label="+driver.LabelInstance+"="+e.instance()); len(left) != 0 {
		t.Errorf("containers of the drained instance left: %v", left)
	}
}

// TestLeaseStormTwoServicesPostgres: two service processes share one
// PostgreSQL, each with warm pools under runc and runsc; concurrent lease
// requests to both never put one sandbox in two active leases, as both
// services' answers and the database show. A lease made through one
// service reads the same through the other. Every answered lease is still
// active at the end, unless its sandbox failed: such a lease must have
// ended with the failure its sandbox records, and is logged as lost to it.
func TestLeaseStormTwoServicesPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	cfg := poolConfig(2, 6, 20*time.Second, fmt.Sprintf("store: {driver: postgres, dsn: %q}\n", dsn))
	var svcs []*service
	var envs []*env
	for range 2 {
		e := newEnv(t, cfg)
		e.requireImage(t, "tool-basic")
		envs = append(envs, e)
		svcs = append(svcs, e.start(t))
	}
	rts := envs[0].runtimes(t)
	for _, s := range svcs {
		for _, rt := range rts {
			waitPool(t, s.client(), "tool-basic-"+rt, 2)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const perService = 8
	type answer struct {
		svc   int
		lease client.Lease
	}
	var mu sync.Mutex
	var answers []answer
	var wg sync.WaitGroup
	for i, s := range svcs {
		for j := range perService {
			wg.Go(func() {
				l, err := s.client().AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "tool-basic",
					Runtime: rts[j%len(rts)], WaitSeconds: 60, TTLSeconds: ptrInt(300)})
				if err != nil {
					t.Errorf("service %d lease %d: %v", i, j, err)
					return
				}
				mu.Lock()
				answers = append(answers, answer{i, *l})
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	bySandbox := map[string]string{}
	warm := 0
	for _, a := range answers {
		if prev, dup := bySandbox[a.lease.SandboxID]; dup {
			t.Errorf("sandbox %s handed to leases %s and %s", a.lease.SandboxID, prev, a.lease.LeaseID)
		}
		bySandbox[a.lease.SandboxID] = a.lease.LeaseID
		if a.lease.Warm {
			warm++
		}
	}
	t.Logf("%d leases over two services, %d warm", len(answers), warm)
	if warm == 0 {
		t.Error("no lease was served warm")
	}
	st, err := postgres.Open(ctx, postgres.Config{DSN: dsn, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	active, err := st.ListLeases(ctx, store.LeaseFilter{States: []sandbox.LeaseState{sandbox.LeaseActive}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	activeIDs := map[string]bool{}
	for _, l := range active {
		if seen[l.SandboxID] {
			t.Errorf("database: sandbox %s in two active leases", l.SandboxID)
		}
		seen[l.SandboxID] = true
		activeIDs[l.ID] = true
		if bySandbox[l.SandboxID] != l.ID {
			t.Errorf("database: active lease %s on %s, the services answered %q", l.ID, l.SandboxID, bySandbox[l.SandboxID])
		}
	}
	// An answered lease stays active until it is released or expires
	// (neither happens before the end of this test), or until its sandbox
	// fails: then the sandbox records why and the lease ends with that
	// reason. Nothing else may end it.
	lost := 0
	for _, a := range answers {
		id := a.lease.LeaseID
		other := svcs[1-a.svc].client() // the store is shared
		if activeIDs[id] {
			if got, err := other.GetLease(ctx, id); err != nil || got.SandboxID != a.lease.SandboxID || got.State != "active" {
				t.Errorf("lease %s through the other service: %+v %v", id, got, err)
			}
			continue
		}
		l, lerr := st.GetLease(ctx, "", id)
		sb, serr := st.GetSandbox(ctx, "", a.lease.SandboxID)
		if lerr != nil || serr != nil {
			t.Errorf("lease %s answered active is not active in the database; reading it and its sandbox: %v, %v", id, lerr, serr)
			continue
		}
		if sb.State != sandbox.StateFailed || sb.FailureReason == "" || l.State != sandbox.LeaseReleased ||
			l.EndReason != "sandbox failed: "+sb.FailureReason {
			t.Errorf("lease %s answered active on %s ended without a recorded failure of its sandbox: lease %s (%q), sandbox %s (%q)",
				id, sb.ID, l.State, l.EndReason, sb.State, sb.FailureReason)
			continue
		}
		lost++
		t.Logf("lease %s ended because its sandbox %s (%s, service %d) failed: %s", id, sb.ID, sb.Runtime, a.svc, sb.FailureReason)
		if got, err := other.GetLease(ctx, id); err != nil || got.State != string(l.State) || got.EndReason != l.EndReason {
			t.Errorf("lease %s through the other service: %+v %v; the database has %s (%q)", id, got, err, l.State, l.EndReason)
		}
	}
	if len(active) != len(answers)-lost {
		t.Errorf("database holds %d active leases; the services answered %d, of which %d ended with a recorded sandbox failure",
			len(active), len(answers), lost)
	}
	for _, a := range answers {
		if !activeIDs[a.lease.LeaseID] {
			continue // ended already
		}
		if err := svcs[a.svc].client().ReleaseLease(ctx, a.lease.LeaseID); err != nil {
			t.Errorf("release %s: %v", a.lease.LeaseID, err)
		}
	}
}

func ptrInt(v int64) *int64 { return &v }

// TestLeaseBurst: 100 concurrent lease requests against a warm runc pool
// of 20 and a host capacity of 30 sandboxes. Every request is served or
// answered 429/503 with Retry-After in time, and no sandbox is leased
// twice. The pool's refill rate is logged. (runc only: the point is the
// claim and admission path, which does not depend on the runtime; the
// warm-claim path under runsc is covered by TestLeaseWarmPool.)
func TestLeaseBurst(t *testing.T) {
	t.Parallel()
	const pool, capacity, requests, wait = 20, 30, 100, 5
	cfg := fmt.Sprintf(`warm_pools: true
limits: {max_sandboxes: %d}
capacity: {cpu: 64, memory_mb: 65536}
intervals: {pool_check: 2s, reconcile: 5s}
profiles:
  - name: tool-basic
    recipe: tool-basic
    allowed_runtimes: [runc]
    default_risk_level: low
    resources: {cpu: 0.1, memory_mb: 64, pids: 64}
    network: none
    user: "1000:1000"
    pools: [{runtime: runc, min_idle: %d, max_total: %d}]
`, capacity, pool, capacity)
	e := newEnv(t, cfg)
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	start := time.Now()
	p := waitPool(t, c, "tool-basic-runc", pool)
	t.Logf("pool of %d filled in %v (refill rate %.1f sandboxes/s)", pool, time.Since(start).Round(time.Millisecond), p.RefillRate)

	type result struct {
		status     int
		code       string
		retryAfter string
		lease      client.Lease
		took       time.Duration
	}
	results := make([]result, requests)
	body, _ := json.Marshal(client.AcquireLeaseRequest{Profile: "tool-basic", WaitSeconds: wait, TTLSeconds: ptrInt(120)})
	hc := &http.Client{Timeout: callTimeout}
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", svc.url()+"/v1/leases", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+e.apiKey)
			t0 := time.Now()
			resp, err := hc.Do(req)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			defer resp.Body.Close()
			r := result{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), took: time.Since(t0)}
			if resp.StatusCode == http.StatusCreated {
				_ = json.NewDecoder(resp.Body).Decode(&r.lease)
			} else {
				var pr client.Problem
				_ = json.NewDecoder(resp.Body).Decode(&pr)
				r.code = pr.Code
			}
			results[i] = r
		})
	}
	wg.Wait()
	served, warm, refused := 0, 0, 0
	seen := map[string]bool{}
	var slowest time.Duration
	for i, r := range results {
		slowest = max(slowest, r.took)
		switch r.status {
		case http.StatusCreated:
			served++
			if r.lease.Warm {
				warm++
			}
			if seen[r.lease.SandboxID] {
				t.Errorf("sandbox %s leased twice", r.lease.SandboxID)
			}
			seen[r.lease.SandboxID] = true
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
			refused++
			if r.retryAfter == "" {
				t.Errorf("request %d: %d %s without Retry-After", i, r.status, r.code)
			}
			// Timely: the wait plus the time of a cold create at most.
			if r.took > (wait+60)*time.Second {
				t.Errorf("request %d refused only after %v", i, r.took)
			}
		default:
			t.Errorf("request %d: status %d %s", i, r.status, r.code)
		}
	}
	t.Logf("burst of %d: %d served (%d warm), %d refused with Retry-After; slowest answer %v", requests, served, warm, refused, slowest.Round(time.Millisecond))
	if served > capacity || served < pool {
		t.Errorf("%d served; want between the pool (%d) and the capacity (%d)", served, pool, capacity)
	}
	if warm < pool {
		t.Errorf("%d leases warm, want at least the %d pool members", warm, pool)
	}
	// Release everything; the pool refills and its rate is reported.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var rwg sync.WaitGroup
	for _, r := range results {
		if r.status == http.StatusCreated {
			rwg.Go(func() {
				if err := c.ReleaseLease(ctx, r.lease.LeaseID); err != nil {
					t.Errorf("release %s: %v", r.lease.LeaseID, err)
				}
			})
		}
	}
	rwg.Wait()
	refill := time.Now()
	p = waitPool(t, c, "tool-basic-runc", pool)
	t.Logf("pool refilled to %d in %v after the release: refill rate %.1f sandboxes/s", pool, time.Since(refill).Round(time.Millisecond), p.RefillRate)
}
