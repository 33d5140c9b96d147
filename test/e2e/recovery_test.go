package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/images"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/store/sqlite"
	"genesis.dev/sandbox/internal/testenv"
)

// TestCrashRecovery kills the service with SIGKILL while jobs run in a runc
// and a runsc sandbox, restarts it on the same data dir and checks that the
// new process finishes the jobs as lost, adopts both sandboxes (exec works
// again), removes a container labelled as its own that has no record, and
// leaves alone a container of another service instance.
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "intervals: {reconcile: 1s, orphan_grace: 1s}\n")
	e.requireImage(t, "tool-basic")
	svc1 := e.start(t)
	c1 := svc1.client()
	inst := e.instance()
	dbPath := filepath.Join(e.dataDir, "genesis.db")

	var sbs []*client.Sandbox
	for _, rt := range e.runtimes(t) {
		sbs = append(sbs, e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt}))
	}
	// One long job per sandbox, in flight when the service dies. The calls
	// to the restarted service below take their own contexts, so the time
	// spent killing and restarting does not eat into their limits.
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	inFlight := make(chan error, len(sbs))
	for _, sb := range sbs {
		go func() {
			_, err := c1.Exec(ctx, sb.ID, client.ExecRequest{Command: []string{"sleep", "20"}, TimeoutMS: 60_000})
			inFlight <- err
		}()
	}
	for _, sb := range sbs {
		eventually(t, 20*time.Second, "the long job runs in "+sb.ID, func() (bool, string) {
			names := processNames(t, c1, sb.ID)
			return slices.Contains(names, "sleep"), "processes " + strings.Join(names, " ")
		})
	}

	svc1.kill(t)
	for range sbs {
		select {
		case err := <-inFlight:
			if err == nil {
				t.Errorf("an exec in flight when the service was killed reported success")
			}
		case <-time.After(stopTimeout):
			t.Fatalf("an exec call did not return after the service was killed")
		}
	}

	// What the dead service left in its store: the jobs it was running.
	running := unfinishedJobs(t, dbPath)
	jobOf := map[string]string{}
	for _, j := range running {
		jobOf[j.SandboxID] = j.ID
	}
	for _, sb := range sbs {
		if jobOf[sb.ID] == "" {
			t.Fatalf("no running job of %s in the store after the kill; unfinished jobs: %v", sb.ID, running)
		}
	}

	// A container of another instance, then one labelled as ours with no
	// record: the restarted reconciler must remove only the second.
	foreignID := startLabelledContainer(t, e, "gs-e2eforeign", "foreign")
	orphanID := startLabelledContainer(t, e, inst, "orphan")

	svc2 := e.start(t)
	c2 := svc2.client()
	if got := e.instance(); got != inst {
		t.Fatalf("instance id changed across the restart: %s → %s", inst, got)
	}

	for sbID, jobID := range jobOf {
		eventually(t, 10*time.Second, "job "+jobID+" of "+sbID+" marked lost", func() (bool, string) {
			j, err := c2.GetJob(callCtx(t), jobID)
			if err != nil {
				return false, err.Error()
			}
			return j.State == "lost" && j.ExitReason == "lost" && j.FinishedAt != nil, j.State + "/" + j.ExitReason
		})
	}
	for _, sb := range sbs {
		eventually(t, 30*time.Second, sb.Runtime+" sandbox "+sb.ID+" adopted and answering", func() (bool, string) {
			got, err := c2.GetSandbox(callCtx(t), sb.ID)
			if err != nil {
				return false, err.Error()
			}
			if got.State != "ready" {
				return false, "state " + got.State + " " + got.FailureReason
			}
			res, err := c2.Exec(callCtx(t), sb.ID, client.ExecRequest{Command: []string{"echo", "back"}})
			if err != nil {
				return false, err.Error()
			}
			return res.ExitCode == 0 && res.Stdout == "back\n", res.Stdout + res.Stderr
		})
	}
	eventually(t, 20*time.Second, "orphan container "+orphanID+" removed by the reconciler", func() (bool, string) {
		left := sandboxContainers(t, orphanID)
		return len(left) == 0, strings.Join(left, " ")
	})
	// A second orphan made now is removed by a later reconcile pass, so the
	// pass that removed the first one (and judged the older foreign
	// container too) has finished.
	sentinelID := startLabelledContainer(t, e, inst, "sentinel")
	eventually(t, 20*time.Second, "sentinel orphan "+sentinelID+" removed by the reconciler", func() (bool, string) {
		left := sandboxContainers(t, sentinelID)
		return len(left) == 0, strings.Join(left, " ")
	})
	if got := sandboxContainers(t, foreignID); len(got) != 1 {
		t.Errorf("the container of another service instance was touched: %v", got)
	}

	for _, sb := range sbs {
		if err := c2.DeleteSandbox(callCtx(t), sb.ID); err != nil {
			t.Fatalf("delete %s: %v", sb.ID, err)
		}
		if left := sandboxContainers(t, sb.ID); len(left) != 0 {
			t.Errorf("after delete Docker still has containers of %s: %v", sb.ID, left)
		}
	}
	svc2.stop(t)
	if left := unfinishedJobs(t, dbPath); len(left) != 0 {
		t.Errorf("jobs left pending or running after recovery: %v", left)
	}
}

// unfinishedJobs reads the pending and running jobs from a stopped
// service's database.
func unfinishedJobs(t *testing.T, dbPath string) []*sandbox.Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	st, err := sqlite.Open(ctx, sqlite.Config{Path: dbPath})
	if err != nil {
		t.Fatalf("open store %s: %v", dbPath, err)
	}
	defer st.Close()
	jobs, err := st.ListJobs(ctx, store.JobFilter{States: []sandbox.JobState{sandbox.JobPending, sandbox.JobRunning}})
	if err != nil {
		t.Fatalf("list jobs: %v", err)
	}
	return jobs
}

// startLabelledContainer runs a container carrying the labels of a sandbox
// of instance inst, created long ago, with a fresh sandbox id that has no
// record. It is removed when t ends if still there. It returns the id.
func startLabelledContainer(t *testing.T, e *env, inst, what string) string {
	t.Helper()
	id := sandbox.NewID("sbx")
	r, _ := images.Lookup("tool-basic")
	old := time.Now().Add(-24 * time.Hour).UTC().Format(time.RFC3339)
	labels := map[string]string{
		driver.LabelManaged:   "true",
		driver.LabelInstance:  inst,
		driver.LabelSandbox:   id,
		driver.LabelProfile:   "tool-basic",
		driver.LabelRuntime:   "runc",
		driver.LabelPurpose:   "sandbox",
		driver.LabelCreatedAt: old,
		driver.LabelExpiresAt: old,
		testenv.LabelTest:     "1",
	}
	args := []string{"run", "-d", "--name", "genesis-e2e-" + what + "-" + id, "--network", "none", "--user", "1000:1000"}
	for _, k := range sortedKeys(labels) {
		args = append(args, "--label", k+"="+labels[k])
	}
	cid := dockerCmd(t, append(args, r.Ref(), "sleep", "300")...)
	t.Cleanup(func() {
		if left := containers(t, "id="+cid); len(left) > 0 {
			dockerCmd(t, "rm", "-f", cid)
		}
	})
	return id
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
