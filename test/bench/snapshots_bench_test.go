package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// snapProfile is the profile of the snapshot benchmarks: Python, to hold
// memory the way an agent's kernel does.
const snapProfile = "code-python-basic"

// residentMiB is what each sandbox of the snapshot benchmarks keeps
// resident: a Python process that touched every page of a bytearray.
const residentMiB = 250

// BenchmarkSnapshots measures, per runtime, on sandboxes with a 512 MiB
// limit and ~250 MiB resident (a Python process): pause and resume,
// snapshot save (with memory under runsc, files under runc), hibernate,
// wake to the first exec, fork ×10 to ten ready sandboxes, the snapshot's
// size on disk and what a hibernated sandbox still holds (its containers),
// beside a cold create of the same profile to its first exec in the same
// run.
func BenchmarkSnapshots(b *testing.B) {
	s := startService(b)
	iters := envInt(b, "GENESIS_BENCH_SNAPSHOT_ITERS", 5)
	pauses := envInt(b, "GENESIS_BENCH_PAUSE_ITERS", 20)
	forks := envInt(b, "GENESIS_BENCH_FORK_COUNT", 10)
	tbl := NewTable("runtime", "memory", "pause p50", "resume p50", "snapshot p50", "snapshot MiB", "hibernate p50",
		"wake→1st exec p50", "hibernated holds", fmt.Sprintf("fork ×%d", forks), "cold create→1st exec p50")
	fmt.Printf("snapshot benchmarks: load average %s\n", loadAvg())
	s.eachRuntime(b, func(b *testing.B, rt string) {
		ctx := context.Background()
		cold := coldCreates(b, s, rt, iters)
		sb := s.residentSandbox(b, rt)
		var pause, resume []time.Duration
		for range pauses {
			t0 := time.Now()
			if _, err := s.client.PauseSandbox(ctx, sb); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if _, err := s.client.ResumeSandbox(ctx, sb); err != nil {
				b.Fatal(err)
			}
			pause, resume = append(pause, t1.Sub(t0)), append(resume, time.Since(t1))
		}
		var save []time.Duration
		var size int64
		memory := false
		for range iters {
			t0 := time.Now()
			sn, err := s.client.CreateSnapshot(ctx, sb, client.CreateSnapshotRequest{})
			if err != nil {
				b.Fatal(err)
			}
			save = append(save, time.Since(t0))
			size, memory = sn.SizeBytes, sn.Memory
			if err := s.client.DeleteSnapshot(ctx, sn.ID); err != nil {
				b.Fatal(err)
			}
		}
		var hib, wake []time.Duration
		holds := ""
		for i := range iters {
			t0 := time.Now()
			if _, err := s.client.HibernateSandbox(ctx, sb); err != nil {
				b.Fatal(err)
			}
			hib = append(hib, time.Since(t0))
			if i == 0 {
				out, err := dockerCLI(ctx, "ps", "-aq", "--filter", "label=dev.genesis.sandbox="+sb)
				if err != nil {
					b.Fatal(err)
				}
				holds = fmt.Sprintf("%d containers", len(strings.Fields(out)))
			}
			t1 := time.Now()
			// The first exec wakes it.
			res, err := s.client.Exec(ctx, sb, client.ExecRequest{Command: []string{"true"}})
			if err != nil || res.ExitCode != 0 {
				b.Fatalf("exec that wakes: %+v %v", res, err)
			}
			wake = append(wake, time.Since(t1))
		}
		t0 := time.Now()
		fork, err := s.client.ForkSandbox(ctx, sb, client.ForkRequest{Count: forks})
		forkTime := time.Since(t0)
		if err != nil || len(fork.Sandboxes) != forks {
			b.Fatalf("fork ×%d: %+v %v", forks, fork, err)
		}
		for _, c := range fork.Sandboxes {
			s.track(c.ID)
			if err := s.remove(ctx, c.ID); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(Ms(Summarize(pause).P50), "pause-p50-ms")
		b.ReportMetric(Ms(Summarize(resume).P50), "resume-p50-ms")
		b.ReportMetric(Ms(Summarize(save).P50), "snapshot-p50-ms")
		b.ReportMetric(Ms(Summarize(hib).P50), "hibernate-p50-ms")
		b.ReportMetric(Ms(Summarize(wake).P50), "wake-exec-p50-ms")
		b.ReportMetric(Ms(forkTime), "fork-ms")
		tbl.Row(rt, strconv.FormatBool(memory), FormatMs(Summarize(pause).P50), FormatMs(Summarize(resume).P50),
			FormatMs(Summarize(save).P50), fmt.Sprintf("%.1f", float64(size)/(1<<20)), FormatMs(Summarize(hib).P50),
			FormatMs(Summarize(wake).P50), holds, FormatMs(forkTime), FormatMs(Summarize(cold).P50))
	})
	printTable(fmt.Sprintf("state of a sandbox (%s, 512 MiB limit, ~%d MiB resident), ms", snapProfile, residentMiB), tbl)
}

// residentSandbox creates a sandbox of snapProfile with a 512 MiB limit
// and a background Python process holding residentMiB, and returns its id.
func (s *service) residentSandbox(b *testing.B, rt string) string {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	sb, err := s.client.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: snapProfile, Runtime: rt, RiskLevel: riskFor(rt),
		Resources: &client.Resources{CPU: 1, MemoryMB: 512, Pids: 256}, Metadata: map[string]string{"purpose": "bench"}}, "")
	if err != nil {
		b.Fatal(err)
	}
	s.track(sb.ID)
	b.Cleanup(func() { _ = s.remove(context.Background(), sb.ID) })
	code := fmt.Sprintf("import time\nb = bytearray(%d << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nopen('/tmp/ready', 'w').write('1')\ntime.sleep(1e9)\n", residentMiB)
	if _, err := s.client.WriteFile(ctx, sb.ID, "/workspace/hold.py", strings.NewReader(code), client.WriteFileOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := s.client.StartJob(ctx, sb.ID, client.ExecRequest{Command: []string{"python3", "/workspace/hold.py"}}); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		res, err := s.client.Exec(ctx, sb.ID, client.ExecRequest{Command: []string{"cat", "/tmp/ready"}})
		if err == nil && res.Stdout == "1" {
			return sb.ID
		}
		if time.Now().After(deadline) {
			b.Fatalf("the resident process did not start: %+v %v", res, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// track notes a sandbox the benchmark must remove.
func (s *service) track(id string) {
	s.mu.Lock()
	s.live[id] = true
	s.mu.Unlock()
}

// coldCreates times cold creates of snapProfile under rt to their first
// exec.
func coldCreates(b *testing.B, s *service, rt string, n int) []time.Duration {
	b.Helper()
	var out []time.Duration
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		t0 := time.Now()
		sb, err := s.client.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: snapProfile, Runtime: rt, RiskLevel: riskFor(rt),
			Resources: &client.Resources{CPU: 1, MemoryMB: 512, Pids: 256}}, "")
		if err != nil {
			cancel()
			b.Fatal(err)
		}
		s.track(sb.ID)
		if _, err := s.client.Exec(ctx, sb.ID, client.ExecRequest{Command: []string{"true"}}); err != nil {
			cancel()
			b.Fatal(err)
		}
		out = append(out, time.Since(t0))
		if err := s.remove(ctx, sb.ID); err != nil {
			cancel()
			b.Fatal(err)
		}
		cancel()
	}
	return out
}

// riskFor is a risk level runtime may take (runc only low and trusted).
func riskFor(runtime string) string {
	if runtime == "runc" {
		return "low"
	}
	return "untrusted"
}
