package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
)

// dockerRuntimeRoot is where Docker's runc shim keeps runsc's state.
const dockerRuntimeRoot = "/run/docker/runtime-runc/moby"

// TestCheckpointProtocol saves a runsc sandbox whose agent runs a counting
// job: the agent closes its socket for the save (a bound host socket cannot
// be saved), runsc saves it leaving it running, the agent serves again and
// the job counts on. Then a new container with a run directory of its own
// is restored from the image through the runsc-restore runtime: its agent
// serves in the new directory, the same job continues from where it was
// saved, and the identity file names the new container's sandbox and a new
// seed. Under runc the agent refuses: no gVisor, no save.
func TestCheckpointProtocol(t *testing.T) {
	t.Parallel()
	have := needDocker(t)
	if slices.Contains(have, "runc") {
		t.Run("runc refuses", func(t *testing.T) {
			t.Parallel()
			c := startContainer(t, "runc")
			_, err := c.client.PrepareCheckpoint(context.Background(), time.Second)
			if !errors.Is(err, errdefs.ErrNotImplemented) || errdefs.Code(err) != agentproto.CodeCheckpointUnsupported {
				t.Errorf("prepare under runc: %v, want %s", err, agentproto.CodeCheckpointUnsupported)
			}
		})
	}
	if !slices.Contains(have, "runsc") || !slices.Contains(have, driver.RestoreRuntime) {
		t.Skipf("docker runtimes %v: runsc and %s are needed (scripts/host-setup.sh registers them)", have, driver.RestoreRuntime)
	}
	ctx := context.Background()
	c := startContainer(t, "runsc", "--env", agentproto.EnvSandboxID+"=sbx_source")
	job, err := c.client.StartJob(ctx, agentproto.JobStartRequest{ExecRequest: agentproto.ExecRequest{JobID: "job_count",
		Script: "i=0; while true; do i=$((i+1)); echo $i > /tmp/count; sleep 0.2; done"}})
	if err != nil {
		t.Fatal(err)
	}
	count := func(cl *agentclient.Client) int {
		t.Helper()
		res, err := cl.Exec(ctx, agentproto.ExecRequest{JobID: "job_read" + strconv.FormatInt(time.Now().UnixNano(), 36), Command: []string{"cat", "/tmp/count"}})
		if err != nil {
			t.Fatalf("read the count: %v", err)
		}
		n, _ := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
		return n
	}
	waitCount := func(cl *agentclient.Client, above int) int {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			if n := count(cl); n > above {
				return n
			}
			if time.Now().After(deadline) {
				t.Fatalf("the count did not pass %d", above)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	before := waitCount(c.client, 2)
	identity := readIdentity(t, c.runDir)
	if identity[agentproto.EnvSandboxID] != "sbx_source" || identity[agentproto.EnvSeed] == "" || identity["GENESIS_RESTORED"] != "false" {
		t.Fatalf("identity at start: %v", identity)
	}

	// Save, leaving it running.
	if _, err := c.client.PrepareCheckpoint(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	waitNoFile(t, filepath.Join(c.runDir, "agent.sock"))
	image := t.TempDir()
	if out, err := runscCmd("checkpoint", "--image-path", image, "--leave-running", c.id); err != nil {
		t.Fatalf("runsc checkpoint: %v\n%s", err, out)
	}
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := c.client.WaitReady(wctx, 5*time.Millisecond); err != nil {
		t.Fatalf("the agent did not serve again after the save: %v", err)
	}
	saved := count(c.client)
	if after := waitCount(c.client, saved); after <= before {
		t.Errorf("count %d after the save, %d before", after, before)
	}
	if info, err := c.client.JobInfo(ctx, job.JobID); err != nil || !info.Running {
		t.Errorf("the job after the save: %+v %v", info, err)
	}

	// A save of the frozen sandbox (how the service takes one: the files
	// and the memory at one instant) leaves the agent closed until the
	// service says the save is done.
	if _, err := c.client.PrepareCheckpoint(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	waitNoFile(t, filepath.Join(c.runDir, "agent.sock"))
	if out, err := dockerCmd(30*time.Second, nil, "pause", c.id); err != nil {
		t.Fatalf("docker pause: %v %s", err, out)
	}
	if out, err := runscCmd("checkpoint", "--image-path", t.TempDir(), "--leave-running", c.id); err != nil {
		t.Fatalf("runsc checkpoint of a paused sandbox: %v\n%s", err, out)
	}
	if out, err := dockerCmd(30*time.Second, nil, "unpause", c.id); err != nil {
		t.Fatalf("docker unpause: %v %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(c.runDir, agentproto.ResumeFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wctx2, cancel2 := context.WithTimeout(ctx, 5*time.Second) // far below the prepare's 30 s
	defer cancel2()
	if _, err := c.client.WaitReady(wctx2, 5*time.Millisecond); err != nil {
		t.Fatalf("the agent did not serve again when told the save was done: %v", err)
	}

	// Restore the image into a new container. The image holds the count
	// of the save's instant: no less than the one read before the prepare,
	// no more than the one read once the agent served again (however long
	// a loaded machine took to get there, the job counted on meanwhile).
	// The restored job counts on from it: by the time the count is read,
	// once more at most than the ticks of the restore's time and the one
	// sleep the save cut short.
	restoring := time.Now()
	r := restoreContainer(t, c, image, agentproto.EnvSandboxID+"=sbx_fork")
	got := count(r.client)
	ticks := int(time.Since(restoring) / (200 * time.Millisecond))
	if got < before || got > saved+ticks+1 {
		t.Errorf("the restored count is %d; the image was saved between %d and %d, %d ticks ago at most", got, before, saved, ticks)
	}
	waitCount(r.client, got)
	if info, err := r.client.JobInfo(ctx, job.JobID); err != nil || !info.Running {
		t.Errorf("the job in the restored container: %+v %v", info, err)
	}
	id2 := readIdentity(t, r.runDir)
	if id2[agentproto.EnvSandboxID] != "sbx_fork" || id2["GENESIS_RESTORED"] != "true" || id2[agentproto.EnvSeed] == identity[agentproto.EnvSeed] {
		t.Errorf("identity after the restore: %v (before %v)", id2, identity)
	}
}

// restoreContainer makes a container like c, with a run directory of its
// own and env added, and restores it from image instead of starting it.
func restoreContainer(t *testing.T, c *sandboxContainer, image string, env ...string) *sandboxContainer {
	t.Helper()
	runDir := newRunDir(t)
	args := []string{"create", "--name", fmt.Sprintf("genesis-agent-test-restored-%d", time.Now().UnixNano()),
		"--label", "dev.genesis.purpose=agent-test", "--runtime", driver.RestoreRuntime}
	for _, e := range env {
		args = append(args, "--env", e)
	}
	args = append(args, containerArgs(runDir)...)
	id, err := dockerCmd(60*time.Second, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	r := &sandboxContainer{id: id, runDir: runDir, client: agentclient.Dial(filepath.Join(runDir, "agent.sock"))}
	cleanupContainer(t, r)
	order, _ := json.Marshal(driver.RestoreOrder{ImagePath: image})
	if err := os.MkdirAll(driver.RestoreOrderDir, 0o700); err != nil {
		t.Fatal(err)
	}
	orderFile := filepath.Join(driver.RestoreOrderDir, id+".json")
	if err := os.WriteFile(orderFile, order, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(orderFile) })
	if out, err := dockerCmd(60*time.Second, nil, "start", id); err != nil {
		t.Fatalf("docker start (restore): %v %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := r.client.WaitReady(ctx, 5*time.Millisecond); err != nil {
		t.Fatalf("the restored agent does not serve: %v", err)
	}
	return r
}

func runscCmd(args ...string) (string, error) {
	out, err := runCmd(60*time.Second, "runsc", append([]string{"--root", dockerRuntimeRoot}, args...)...)
	return out, err
}

// waitNoFile waits until path no longer exists.
func waitNoFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still there", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readIdentity reads the agent's identity file in a run directory.
func readIdentity(t *testing.T, runDir string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(runDir, "identity"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		out[k] = v
	}
	return out
}

// TestCheckpointSocketGoneWhenClosed readies a runsc sandbox for a save
// the way the service does while a caller follows a job's output (a stream
// that holds the agent's closing for its grace): it pings until nobody
// answers, then freezes, saves and thaws the sandbox and dials it afresh.
// Under gVisor a host socket whose listener closed still takes connections
// (nobody answers or resets them) for as long as its name is there, so the
// name must be gone once the agent is seen closed; else the first dial
// after the save lands on it and is never answered.
func TestCheckpointSocketGoneWhenClosed(t *testing.T) {
	t.Parallel()
	if !slices.Contains(needDocker(t), "runsc") {
		t.Skip("docker runtime runsc not configured (scripts/host-setup.sh registers it)")
	}
	ctx := context.Background()
	c := startContainer(t, "runsc")
	sock := filepath.Join(c.runDir, "agent.sock")
	if _, err := c.client.StartJob(ctx, agentproto.JobStartRequest{ExecRequest: agentproto.ExecRequest{JobID: "job_follow",
		Script: "echo started; exec sleep 3600"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		// Follow the job's output on a client of its own until the save.
		follower := agentclient.Dial(sock)
		sctx, stop := context.WithCancel(ctx)
		following := make(chan struct{})
		var once sync.Once
		go follower.StreamJob(sctx, "job_follow", 0, 0, func(agentproto.Frame) error {
			once.Do(func() { close(following) })
			return nil
		})
		select {
		case <-following:
		case <-time.After(10 * time.Second):
			t.Fatal("the job's output stream did not start")
		}

		if _, err := c.client.PrepareCheckpoint(ctx, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		for {
			pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			_, err := c.client.Ping(pctx)
			cancel()
			if err != nil {
				c.client.Close()
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("save %d: the agent answers no more but its socket is still named (%v)", i, err)
		}

		if out, err := dockerCmd(30*time.Second, nil, "pause", c.id); err != nil {
			t.Fatalf("docker pause: %v %s", err, out)
		}
		if out, err := runscCmd("checkpoint", "--image-path", t.TempDir(), "--leave-running", c.id); err != nil {
			t.Fatalf("runsc checkpoint: %v\n%s", err, out)
		}
		if out, err := dockerCmd(30*time.Second, nil, "unpause", c.id); err != nil {
			t.Fatalf("docker unpause: %v %s", err, out)
		}
		if err := os.WriteFile(filepath.Join(c.runDir, agentproto.ResumeFile), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		// A connection nobody accepts is never answered: 10 s is far above
		// an answer (milliseconds) and below HTTP/2's own 25 s of pings.
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := c.client.WaitReady(wctx, 5*time.Millisecond)
		cancel()
		stop()
		follower.Close()
		if err != nil {
			t.Fatalf("save %d: the first connection after the save was not answered: %v", i, err)
		}
	}
}
