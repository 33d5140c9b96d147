//go:build kube

package kube

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/store/pgtest"
	"genesis.dev/sandbox/internal/store/postgres"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// replicaConfig is a pool of tool-basic Pods under runc, leases ending
// 20 s after they start unless released, on a shared PostgreSQL (its DSN
// filled in with fmt.Sprintf).
var replicaConfig = "warm_pools: true\nstore: {driver: postgres, dsn: %q}\n" + stormProfile(2, 60, 20)

// TestTwoReplicas: two service processes on one PostgreSQL and one
// cluster. 100 concurrent leases spread over both never share a sandbox;
// one replica is killed mid-storm; the other leads, adopts the dead one's
// sandboxes (their leases end, their Pods go), serves any sandbox, and
// afterwards every managed Pod is one it counts.
func TestTwoReplicas(t *testing.T) {
	clearManagedPods(t)
	t.Cleanup(func() { clearManagedPods(t) })
	dsn := pgtest.Start(t)
	cfg := fmt.Sprintf(replicaConfig, dsn)
	dirA, dirB := t.TempDir(), t.TempDir()
	a := startService(t, dirA, cfg)
	// The replicas share the agents' token key (a Secret in a deployment).
	key, err := os.ReadFile(filepath.Join(dirA, "keys", "agent-token.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dirB, "keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dirB, "keys", "agent-token.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	b := startService(t, dirB, cfg)
	ca, cb := a.client(), b.client()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// The pool is the cluster's: A, which started first, leads and makes
	// its members; both replicas count the same two, and no more are made.
	cs := clientset(t)
	eventually(t, 2*time.Minute, "one pool of 2 idle members, seen alike from both replicas", func() (bool, string) {
		pa, pb := waitPool(t, ca, "storm-runc", 2), waitPool(t, cb, "storm-runc", 2)
		live := liveSandboxPods(ctx, t, cs)
		return pa.Total == 2 && pb.Total == 2 && live == 2, fmt.Sprintf("A counts %d, B %d, %d pods", pa.Total, pb.Total, live)
	})
	time.Sleep(3 * time.Second) // three of the leader's looks at the pool; nothing to poll for
	if live := liveSandboxPods(ctx, t, cs); live != 2 {
		t.Fatalf("%d sandbox Pods with a shared pool of min_idle 2; the pool was filled more than once", live)
	}
	// B, which made no member, hands out one of A's.
	if l, err := cb.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "storm", Runtime: "runc"}); err != nil || !l.Warm {
		t.Fatalf("a lease through the replica that does not lead: %+v, %v; want a warm one", l, err)
	} else if err := cb.ReleaseLease(ctx, l.LeaseID); err != nil {
		t.Fatal(err)
	}
	const n = 100
	var (
		mu       sync.Mutex
		bySbx    = map[string]string{}
		served   = [2]int{}
		lostToA  atomic.Int64
		done     atomic.Int64
		wg       sync.WaitGroup
		killedAt time.Time
	)
	killed := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			who, c := i%2, ca
			if who == 1 {
				c = cb
			}
			l, err := c.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "storm", Runtime: "runc", WaitSeconds: 300, Holder: fmt.Sprint("r", i)})
			if err != nil {
				select {
				case <-killed:
					if who == 0 {
						lostToA.Add(1)
						return
					}
				default:
				}
				t.Errorf("lease %d on replica %d: %v", i, who, err)
				return
			}
			mu.Lock()
			if prev, dup := bySbx[l.SandboxID]; dup {
				t.Errorf("sandbox %s leased twice (%s and %s)", l.SandboxID, prev, l.LeaseID)
			}
			bySbx[l.SandboxID] = l.LeaseID
			served[who]++
			mu.Unlock()
			// Any replica serves any sandbox: the exec goes to the other one
			// while both live.
			other := cb
			if who == 1 {
				other = ca
			}
			select {
			case <-killed:
				other = cb
			default:
			}
			res, err := other.Exec(ctx, l.SandboxID, client.ExecRequest{Command: []string{"echo", l.SandboxID}})
			if err == nil && res.Stdout == l.SandboxID+"\n" {
				_ = other.ReleaseLease(ctx, l.LeaseID)
			} else {
				select {
				case <-killed:
					if who == 0 || other == ca {
						lostToA.Add(1)
						return
					}
				default:
				}
				t.Errorf("exec in %s through the other replica: %+v %v", l.SandboxID, res, err)
			}
			done.Add(1)
		})
	}
	// Kill replica A mid-storm.
	for done.Load() < 30 && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	killedAt = time.Now()
	close(killed)
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	t.Logf("%d leases done (%d by A, %d by B), %d lost to the kill of A; storm took until %v after the kill",
		done.Load(), served[0], served[1], lostToA.Load(), time.Since(killedAt).Round(time.Millisecond))
	if served[0] == 0 || served[1] == 0 {
		t.Errorf("the leases were not spread over both replicas: %v", served)
	}

	// B adopts A's sandboxes: no live record names A any more, and B
	// reaches one of them.
	st, err := postgres.Open(ctx, postgres.Config{DSN: dsn, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	instA := readInstance(t, dirA)
	for deadline := time.Now().Add(2 * time.Minute); ; {
		left, err := st.ListSandboxes(ctx, store.SandboxFilter{Instance: instA, States: []sandbox.State{sandbox.StateCreated,
			sandbox.StateStarting, sandbox.StateReady, sandbox.StateLeased, sandbox.StateBusy, sandbox.StateIdle, sandbox.StateDraining}})
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d live sandboxes of the killed replica were not adopted", len(left))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("A's sandboxes adopted %v after the kill", time.Since(killedAt).Round(time.Millisecond))

	// Once A's leases have ended (20 s TTL) and the pool has settled, every
	// managed Pod is a sandbox B counts, and none is left of A. A destroy
	// that A did not finish, even of one of B's sandboxes (A took the
	// record before it began: takeToEnd), is finished when B adopts A's
	// sandboxes, not after the 2.5 min a drain may last.
	for deadline := time.Now().Add(2 * time.Minute); ; {
		p := waitPool(t, cb, "storm-runc", 2)
		live := liveSandboxPods(ctx, t, cs)
		active, err := st.ListLeases(ctx, store.LeaseFilter{States: []sandbox.LeaseState{sandbox.LeaseActive}})
		if err != nil {
			t.Fatal(err)
		}
		if live == p.Total && p.Starting == 0 && len(active) == 0 && p.Counts["idle"] == live {
			t.Logf("settled %v after the kill: %d pods, all idle members of B's pool", time.Since(killedAt).Round(time.Millisecond), live)
			break
		}
		if time.Now().After(deadline) {
			recs, _ := st.ListSandboxes(ctx, store.SandboxFilter{Profile: "storm"})
			var odd []string
			for _, r := range recs {
				if r.State != sandbox.StateDestroyed && r.State != sandbox.StateIdle {
					odd = append(odd, fmt.Sprintf("%s %s instance %s tenant %q updated %s: %s", r.ID, r.State, r.Instance, r.Tenant, r.UpdatedAt.Format(time.RFC3339Nano), r.FailureReason))
				}
			}
			_ = b.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, into its log
			<-b.done
			t.Fatalf("not settled: %d live managed pods, B's pool %+v, %d active leases; records not idle or destroyed: %q", live, p, len(active), odd)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// readInstance is the instance id of a data dir.
func readInstance(t testing.TB, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "instance_id"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b[:len(b)-1])
}
