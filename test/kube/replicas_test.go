//go:build kube

package kube

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/store/pgtest"
	"genesis.dev/sandbox/internal/store/postgres"
	"genesis.dev/sandbox/internal/store/sqlstore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// replicaLeaseTTL is how long the leases of replicaConfig last unless
// released.
const replicaLeaseTTL = 20 * time.Second

// replicaConfig is a pool of tool-basic Pods under runc, leases ending
// replicaLeaseTTL after they are granted unless released, on a shared
// PostgreSQL (its DSN filled in with fmt.Sprintf).
var replicaConfig = "warm_pools: true\nstore: {driver: postgres, dsn: %q}\n" + stormProfile(2, 60, int(replicaLeaseTTL/time.Second))

// recycleProfile is a profile "recycle" whose released sandboxes are reset
// and go back to its pool of 1..4 (appended to replicaConfig's profiles).
var recycleProfile = poolProfile("recycle", "reset", 1, 4, 300)

// TestTwoReplicas: two service processes on one PostgreSQL and one
// cluster. 100 concurrent leases spread over both never share a sandbox;
// one replica is killed mid-storm; the other leads, adopts the dead one's
// sandboxes (their leases end, their Pods go), serves any sandbox, and
// afterwards every managed Pod is one it counts.
func TestTwoReplicas(t *testing.T) {
	clearManagedPods(t)
	t.Cleanup(func() { clearManagedPods(t) })
	dsn := pgtest.Start(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	a, b := startReplicas(t, fmt.Sprintf(replicaConfig, dsn), dirA, dirB)
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
		finished atomic.Int64 // requests answered, whatever the answer
		slowest  time.Duration
		wg       sync.WaitGroup
		killedAt time.Time
	)
	killed := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			defer finished.Add(1)
			who, c := i%2, ca
			if who == 1 {
				c = cb
			}
			asked := time.Now()
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
			slowest = max(slowest, time.Since(asked))
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
	// Kill replica A mid-storm: once 30 requests are answered (counting
	// those that failed, which the storm reports, so that a storm whose
	// leases fail ends with their errors, not at ctx's end).
	for finished.Load() < 30 && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	killedAt = time.Now()
	close(killed)
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	stormEnd := time.Now()
	t.Logf("%d leases done (%d by A, %d by B), %d lost to the kill of A; storm took until %v after the kill; the slowest lease was granted %v after it was asked for",
		done.Load(), served[0], served[1], lostToA.Load(), stormEnd.Sub(killedAt).Round(time.Millisecond), slowest.Round(time.Millisecond))
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

	// Once A's leases have ended and the pool has settled, every managed
	// Pod is a sandbox B counts, and none is left of A. A destroy that A
	// did not finish, even of one of B's sandboxes (A took the record
	// before it began: takeToEnd), is finished when B adopts A's
	// sandboxes, not after the 2.5 min a drain may last.
	settle := settleBound(t)
	for deadline := stormEnd.Add(settle); ; {
		p, perr := poolView(ctx, cb, "storm-runc")
		live := liveSandboxPods(ctx, t, cs)
		active, err := st.ListLeases(ctx, store.LeaseFilter{States: []sandbox.LeaseState{sandbox.LeaseActive}})
		if err != nil {
			t.Fatal(err)
		}
		if perr == nil && live == p.Total && p.Starting == 0 && len(active) == 0 && p.Counts["idle"] == live {
			t.Logf("settled %v after the kill (%v after the storm; bound %v): %d pods, all idle members of B's pool",
				time.Since(killedAt).Round(time.Millisecond), time.Since(stormEnd).Round(time.Millisecond), settle, live)
			break
		}
		if time.Now().After(deadline) {
			_ = b.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, into its log
			<-b.done
			t.Fatalf("not settled %v after the storm: %d live managed pods, B's pool %+v (%v), %d active leases;\n%s",
				settle, live, p, perr, len(active), unsettled(ctx, t, st, cs, active))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// settleBound is how long after the storm's last answer the product
// allows itself to leave only idle pool members behind, from the
// intervals it runs with (the defaults: replicaConfig sets none), summed
// along the longest chain:
//   - the last lease granted expires a lease TTL later (its TTL counts
//     from the grant) and the reconciler's next pass, one reconcile
//     interval on, ends it and destroys its sandbox, whose Pod's removal
//     is one API call (at most a docker_call_timeout);
//   - that frees a place in the pool, and the member made for it is
//     ready, or failed and made again, within agent_ready_timeout plus
//     three docker_call_timeouts (what the product itself allows a
//     create before it calls it stuck: Service.stuck).
//
// The other chains are shorter: an unfinished create of A is ended at
// adoption; a Pod A asked for before the kill and made after its record
// ended is an orphan, removed at the first reconcile pass after
// orphan_grace. None of these depends on how busy the host is, which only
// decides where within the bound the pool settles (30 s on a quiet host,
// about a minute at a load average of 130).
func settleBound(t *testing.T) time.Duration {
	t.Helper()
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	iv := cfg.Intervals
	lease := replicaLeaseTTL + iv.Reconcile + iv.DockerCallTimeout
	member := iv.AgentReadyTimeout + 3*iv.DockerCallTimeout
	orphan := iv.DockerCallTimeout + iv.OrphanGrace + iv.Reconcile
	return max(lease+member, orphan)
}

// poolView reads pool name through c without waiting for it to fill.
func poolView(ctx context.Context, c *client.Client, name string) (client.Pool, error) {
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	pl, err := c.Pools(pctx)
	if err != nil {
		return client.Pool{}, err
	}
	for _, p := range pl.Items {
		if p.Name == name {
			return p, nil
		}
	}
	return client.Pool{}, fmt.Errorf("no pool %s", name)
}

// unsettled says what keeps the storm's end from settling: the records
// that are neither idle nor ended, the active leases and their
// sandboxes, and the live Pods with no live record.
func unsettled(ctx context.Context, t *testing.T, st *sqlstore.Store, cs *kubernetes.Clientset, active []*sandbox.Lease) string {
	t.Helper()
	var b strings.Builder
	recs, err := st.ListSandboxes(ctx, store.SandboxFilter{Profile: "storm"})
	if err != nil {
		return err.Error()
	}
	live := map[string]bool{}
	for _, r := range recs {
		if r.State == sandbox.StateDestroyed || r.State == sandbox.StateFailed {
			continue
		}
		live[r.ID] = true
		if r.State != sandbox.StateIdle {
			fmt.Fprintf(&b, "record %s %s instance %s tenant %q updated %s: %s\n", r.ID, r.State, r.Instance, r.Tenant, r.UpdatedAt.Format(time.RFC3339Nano), r.FailureReason)
		}
	}
	for _, l := range active {
		sb, err := st.GetSandbox(ctx, "", l.SandboxID)
		if err != nil {
			fmt.Fprintf(&b, "active lease %s expiring %s of sandbox %s: %v\n", l.ID, l.ExpiresAt.Format(time.RFC3339Nano), l.SandboxID, err)
			continue
		}
		fmt.Fprintf(&b, "active lease %s expiring %s of sandbox %s %s instance %s\n", l.ID, l.ExpiresAt.Format(time.RFC3339Nano), sb.ID, sb.State, sb.Instance)
	}
	pods, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "dev.genesis.managed=true,dev.genesis.purpose=sandbox"})
	if err != nil {
		return b.String() + err.Error()
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && !live[p.Labels["dev.genesis.sandbox"]] {
			fmt.Fprintf(&b, "pod %s of sandbox %s instance %s made %s has no live record\n", p.Name, p.Labels["dev.genesis.sandbox"],
				p.Labels["dev.genesis.instance"], p.CreationTimestamp.Format(time.RFC3339))
		}
	}
	return b.String()
}

// startReplicas starts two services with config cfg on data dirs dirA
// (first: it leads) and dirB, sharing the agents' token key (a Secret in a
// deployment).
func startReplicas(t *testing.T, cfg, dirA, dirB string) (a, b *service) {
	t.Helper()
	a = startService(t, dirA, cfg)
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
	return a, startService(t, dirB, cfg)
}

// TestHandOver: a member of the shared pool made by A, leased and released
// through B, is reset by B and returns to the pool in the same Pod. Then a
// replica stopped with SIGTERM (a rolling update) leaves its sandboxes to
// the other: the leader adopts them within seconds, and they go on as
// they were — the same Pod, its files, its lease, which the other replica
// renews and releases — while the pool keeps its members.
func TestHandOver(t *testing.T) {
	clearManagedPods(t)
	t.Cleanup(func() { clearManagedPods(t) })
	dsn := pgtest.Start(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	a, b := startReplicas(t, fmt.Sprintf(replicaConfig, dsn)+recycleProfile, dirA, dirB)
	ca, cb := a.client(), b.client()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cs := clientset(t)
	waitPool(t, cb, "storm-runc", 2)
	st, err := postgres.Open(ctx, postgres.Config{DSN: dsn, MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	// A member A made, leased and released through B, is reset by B and
	// goes back to the shared pool as B's, in the same Pod.
	waitPool(t, cb, "recycle-runc", 1)
	rl, err := cb.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "recycle", Runtime: "runc"})
	if err != nil || !rl.Warm {
		t.Fatalf("a warm lease of the recycle pool through B: %+v, %v", rl, err)
	}
	ruid := podOf(ctx, t, cs, rl.SandboxID).UID
	if err := cb.ReleaseLease(ctx, rl.LeaseID); err != nil {
		t.Fatal(err)
	}
	instB := readInstance(t, dirB)
	// A reset is bounded at 2 min by the service (resetMember: the agent's
	// reset within resetTimeout, 90 s, and 30 s for the rest); after that
	// it destroys the sandbox instead, which the check below reports.
	const resetBound = 2 * time.Minute
	eventually(t, resetBound, "the released member reset by B and idle again", func() (bool, string) {
		r, err := st.GetSandbox(ctx, "", rl.SandboxID)
		if err != nil {
			return false, err.Error()
		}
		return r.State == sandbox.StateIdle && r.Instance == instB, fmt.Sprintf("%s, owned by %s (B is %s)", r.State, r.Instance, instB)
	})
	if got := podOf(ctx, t, cs, rl.SandboxID).UID; got != ruid {
		t.Errorf("the reset member's Pod was replaced (%s → %s)", ruid, got)
	}

	// Through A: a sandbox with a file in it, and a lease.
	sb, err := ca.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "storm", Runtime: "runc", TTLSeconds: 600}, "")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := ca.Exec(ctx, sb.ID, client.ExecRequest{Command: []string{"sh", "-c", "echo kept > /workspace/f"}}); err != nil || res.ExitCode != 0 {
		t.Fatalf("write a file: %+v, %v", res, err)
	}
	leaseTTL := int64(300) // the profile's default is 20 s
	l, err := ca.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "storm", Runtime: "runc", TTLSeconds: &leaseTTL})
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]types.UID{}
	for _, id := range []string{sb.ID, l.SandboxID} {
		uids[id] = podOf(ctx, t, cs, id).UID
	}
	pods := liveSandboxPods(ctx, t, cs)

	// SIGTERM: A takes no more work, stops, and its store lock goes with it.
	stoppedAt := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The hand-over waits for the pool members A is making (at most 2 min:
	// assemble's Stack.Drain; a member's create is bounded alike, by
	// agent_ready_timeout and three docker_call_timeouts), then A closes,
	// its calls in flight ending with their contexts.
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	stopBound := 2*time.Minute + cfg.Intervals.DockerCallTimeout
	select {
	case <-a.done:
	case <-time.After(stopBound):
		t.Fatalf("A did not stop within %v of SIGTERM", stopBound)
	}
	t.Logf("A stopped %v after SIGTERM", time.Since(stoppedAt).Round(time.Millisecond))
	instA := readInstance(t, dirA)
	eventually(t, time.Minute, "A's sandboxes adopted by B", func() (bool, string) {
		left, err := st.ListSandboxes(ctx, store.SandboxFilter{Instance: instA, ExcludeFinal: true})
		if err != nil {
			return false, err.Error()
		}
		return len(left) == 0, fmt.Sprintf("%d records still name A", len(left))
	})
	t.Logf("A's sandboxes adopted %v after SIGTERM", time.Since(stoppedAt).Round(time.Millisecond))

	// They go on as they were, through B.
	for id, uid := range uids {
		if got := podOf(ctx, t, cs, id).UID; got != uid {
			t.Errorf("the Pod of %s was replaced (%s → %s)", id, uid, got)
		}
	}
	if res, err := cb.Exec(ctx, sb.ID, client.ExecRequest{Command: []string{"cat", "/workspace/f"}}); err != nil || res.Stdout != "kept\n" {
		t.Errorf("the file written through A, read through B: %+v, %v", res, err)
	}
	if _, err := cb.RenewLease(ctx, l.LeaseID, nil); err != nil {
		t.Errorf("renewing A's lease through B: %v", err)
	}
	if err := cb.ReleaseLease(ctx, l.LeaseID); err != nil {
		t.Errorf("releasing A's lease through B: %v", err)
	}
	if err := cb.DeleteSandbox(ctx, sb.ID); err != nil {
		t.Errorf("deleting A's sandbox through B: %v", err)
	}
	if live := liveSandboxPods(ctx, t, cs); live < pods-2 {
		t.Errorf("%d sandbox Pods after the hand-over and two ends, %d before: the hand-over destroyed some", live, pods)
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
