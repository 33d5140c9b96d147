//go:build kube

package kube

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"genesis.dev/sandbox/client"
)

// stormProfile is a profile "storm" of tool-basic Pods under runc with a
// warm pool of minIdle..maxTotal, its leases ending after ttl seconds.
func stormProfile(minIdle, maxTotal, ttl int) string {
	return "profiles:\n" + poolProfile("storm", "destroy", minIdle, maxTotal, ttl)
}

// poolProfile is a profiles entry called name of tool-basic Pods under
// runc with a warm pool of minIdle..maxTotal, its leases ending after ttl
// seconds and onRelease (destroy or reset) done to released sandboxes.
func poolProfile(name, onRelease string, minIdle, maxTotal, ttl int) string {
	return fmt.Sprintf(`  - name: %s
    recipe: tool-basic
    allowed_runtimes: [runc]
    default_risk_level: low
    resources: {cpu: 0.5, memory_mb: 256, pids: 128}
    network: none
    user: "1000:1000"
    pools: [{runtime: runc, min_idle: %d, max_total: %d}]
    lease: {default_ttl_seconds: %d, max_ttl_seconds: 600, on_release: %s}
`, name, minIdle, maxTotal, ttl, onRelease)
}

// stormConfig is a warm pool of tool-basic Pods under runc.
var stormConfig = "warm_pools: true\n" + stormProfile(3, 24, 300)

// TestLeaseStorm: many concurrent leases of a pool of Pods each get a
// sandbox of their own that answers; after a restart the service adopts
// its pool's Pods, serves a lease from them, and no Pod is left that the
// pool does not count.
func TestLeaseStorm(t *testing.T) {
	clearManagedPods(t)
	t.Cleanup(func() { clearManagedPods(t) })
	dir := t.TempDir()
	s := startService(t, dir, stormConfig)
	c := s.client()
	waitPool(t, c, "storm-runc", 3)

	const n = 20
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var (
		mu    sync.Mutex
		held  = map[string]string{} // sandbox → lease
		warm  int
		wg    sync.WaitGroup
		errs  = make(chan error, n)
		start = make(chan struct{})
		hold  = make(chan struct{})
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			l, err := c.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "storm", Runtime: "runc", WaitSeconds: 120, Holder: fmt.Sprint("storm-", i)})
			if err != nil {
				errs <- fmt.Errorf("lease %d: %w", i, err)
				return
			}
			defer func() {
				<-hold
				if err := c.ReleaseLease(context.WithoutCancel(ctx), l.LeaseID); err != nil {
					errs <- fmt.Errorf("release %s: %w", l.LeaseID, err)
				}
			}()
			mu.Lock()
			if other, dup := held[l.SandboxID]; dup {
				errs <- fmt.Errorf("sandbox %s leased twice (leases %s and %s)", l.SandboxID, other, l.LeaseID)
			}
			held[l.SandboxID] = l.LeaseID
			if l.Warm {
				warm++
			}
			mu.Unlock()
			res, err := c.Exec(ctx, l.SandboxID, client.ExecRequest{Command: []string{"echo", l.SandboxID}})
			if err != nil || res.Stdout != l.SandboxID+"\n" {
				errs <- fmt.Errorf("exec in %s: %+v, %v", l.SandboxID, res, err)
			}
		}()
	}
	t0 := time.Now()
	close(start)
	// Every lease is held at once before any is released.
	for deadline := time.Now().Add(4 * time.Minute); ; {
		mu.Lock()
		got := len(held)
		mu.Unlock()
		if got == n || len(errs) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	all := time.Since(t0)
	close(hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(held) != n {
		t.Fatalf("%d distinct sandboxes leased; want %d", len(held), n)
	}
	t.Logf("%d concurrent leases held in %v, %d warm", n, all, warm)

	// Restart: the new process adopts the pool's Pods.
	s.stop()
	s = startService(t, dir, stormConfig)
	c = s.client()
	p := waitPool(t, c, "storm-runc", 3)
	l, err := c.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "storm", Runtime: "runc"})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Warm {
		t.Errorf("the first lease after a restart was cold; the pool held %+v", p)
	}
	if res, err := c.Exec(ctx, l.SandboxID, client.ExecRequest{Command: []string{"echo", "adopted"}}); err != nil || res.Stdout != "adopted\n" {
		t.Errorf("exec in an adopted member: %+v, %v", res, err)
	}
	if err := c.ReleaseLease(ctx, l.LeaseID); err != nil {
		t.Fatal(err)
	}
	// Once settled, every managed Pod is a member the pool counts.
	cs := clientset(t)
	for deadline := time.Now().Add(2 * time.Minute); ; {
		p = waitPool(t, c, "storm-runc", 3)
		live := liveSandboxPods(ctx, t, cs)
		if live == p.Total && p.Starting == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d live managed pods, the pool counts %d (%+v)", live, p.Total, p)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitPool waits until pool holds at least n idle members.
func waitPool(t testing.TB, c *client.Client, name string, n int) client.Pool {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		pl, err := c.Pools(ctx)
		cancel()
		if err == nil {
			for _, p := range pl.Items {
				if p.Name == name && p.Counts["idle"] >= n {
					return p
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool %s never held %d idle members: %+v %v", name, n, pl, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// liveSandboxPods counts the driver's sandbox Pods that are not being
// deleted.
func liveSandboxPods(ctx context.Context, t testing.TB, cs *kubernetes.Clientset) int {
	t.Helper()
	return livePods(ctx, t, cs, "dev.genesis.managed=true,dev.genesis.purpose=sandbox")
}

// livePods counts the Pods of selector that are not being deleted.
func livePods(ctx context.Context, t testing.TB, cs *kubernetes.Clientset, selector string) int {
	t.Helper()
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	live := 0
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp == nil {
			live++
		}
	}
	return live
}
