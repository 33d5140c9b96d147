package agent_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
)

// BenchmarkJobStreamHop streams a job's bulk stdout (a cat of a file)
// from an agent process to this process's agentclient, the way the
// service follows a job, and reports the CPU and the read and write
// system calls per GiB of each side of the HTTP/2 hop: the agent (the cat
// excluded) and this process (the reader). GENESIS_BENCH_HOP_MIB sets the
// size (default 256).
func BenchmarkJobStreamHop(b *testing.B) {
	mib := 256
	if v := os.Getenv("GENESIS_BENCH_HOP_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("GENESIS_BENCH_HOP_MIB=%q", v)
		}
		mib = n
	}
	total := int64(mib) << 20
	file := filepath.Join(b.TempDir(), "out")
	line := bytes.Repeat([]byte("0123456789abcdef"), 6)
	line = append(line, '\n')
	data := bytes.Repeat(line, int(total)/len(line)+1)[:total]
	if err := os.WriteFile(file, data, 0o600); err != nil {
		b.Fatal(err)
	}
	a := startAgentSocket(b, "", "GENESIS_AGENT_LOG_LEVEL=info")
	ctx := context.Background()
	self := os.Getpid()
	var agentCPU, selfCPU time.Duration
	var agentIO, selfIO [2]int64
	b.ReportMetric(0, "ns/op")
	b.SetBytes(total)
	b.ResetTimer()
	for i := range b.N {
		a0, s0 := procCPU(b, a.pid()), procCPU(b, self)
		ai0, si0 := procSyscalls(b, a.pid()), procSyscalls(b, self)
		var got int64
		req := agentproto.JobStartRequest{ExecRequest: agentproto.ExecRequest{
			JobID: fmt.Sprintf("hop-%d", i), Command: []string{"cat", file}, MaxOutputBytes: total,
		}}
		err := a.client.StartJobFollow(ctx, req, func(agentproto.JobInfo) {}, func(f agentproto.Frame) error {
			if f.Type == agentproto.FrameStdout {
				if f.Offset != got {
					return fmt.Errorf("frame at %d, want %d", f.Offset, got)
				}
				got += int64(len(f.Payload))
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if got != total {
			b.Fatalf("%d bytes streamed, want %d", got, total)
		}
		agentCPU += procCPU(b, a.pid()) - a0
		selfCPU += procCPU(b, self) - s0
		ai1, si1 := procSyscalls(b, a.pid()), procSyscalls(b, self)
		for k := range 2 {
			agentIO[k] += ai1[k] - ai0[k]
			selfIO[k] += si1[k] - si0[k]
		}
		if err := a.client.ForgetJob(ctx, req.JobID); err != nil {
			b.Fatal(err)
		}
	}
	gib := float64(total) * float64(b.N) / (1 << 30)
	b.ReportMetric(agentCPU.Seconds()/gib, "agent-CPU-s/GiB")
	b.ReportMetric(selfCPU.Seconds()/gib, "reader-CPU-s/GiB")
	b.ReportMetric(float64(agentIO[0])/gib, "agent-reads/GiB")
	b.ReportMetric(float64(agentIO[1])/gib, "agent-writes/GiB")
	b.ReportMetric(float64(selfIO[0])/gib, "reader-reads/GiB")
	b.ReportMetric(float64(selfIO[1])/gib, "reader-writes/GiB")
}

// procSyscalls returns the read and write system calls pid has made
// (/proc/<pid>/io syscr and syscw).
func procSyscalls(tb testing.TB, pid int) [2]int64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		tb.Fatal(err)
	}
	var n [2]int64
	for _, l := range strings.Split(string(raw), "\n") {
		k, v, _ := strings.Cut(l, ": ")
		switch k {
		case "syscr":
			n[0], _ = strconv.ParseInt(v, 10, 64)
		case "syscw":
			n[1], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return n
}

// TestJobStreamStalledReaderBounded checks the flow control of the HTTP/2
// hop: a reader that stops taking a job's stream holds a bounded amount of
// it in memory (the stream's window and a frame or two), not what the job
// goes on writing, and gets all of it, in order, once it reads again.
func TestJobStreamStalledReaderBounded(t *testing.T) {
	const total = 96 << 20
	a := startAgentSocket(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := agentproto.JobStartRequest{ExecRequest: agentproto.ExecRequest{
		JobID: "stalled", Command: []string{"head", "-c", strconv.Itoa(total), "/dev/zero"}, MaxOutputBytes: total,
	}}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	stalled, resume := make(chan struct{}), make(chan struct{})
	var got int64
	errc := make(chan error, 1)
	go func() {
		errc <- a.client.StartJobFollow(ctx, req, func(agentproto.JobInfo) {}, func(f agentproto.Frame) error {
			if f.Type != agentproto.FrameStdout {
				return nil
			}
			if f.Offset != got {
				return fmt.Errorf("frame at %d, want %d", f.Offset, got)
			}
			if got == 0 {
				close(stalled)
				<-resume
			}
			got += int64(len(f.Payload))
			return nil
		})
	}()
	select {
	case <-stalled:
	case err := <-errc:
		t.Fatalf("stream ended before its first frame: %v", err)
	}
	// The job writes everything while the reader stalls (the agent keeps
	// it); the reader's process must not take it all in meanwhile.
	for {
		info, err := a.client.JobInfo(ctx, req.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Running {
			if info.StdoutBytes != total {
				t.Fatalf("job wrote %d bytes, want %d", info.StdoutBytes, total)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatal("job did not end")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Watch the reader's heap for a while after the job's end: whatever the
	// connection would buffer arrives in this time.
	const bound = 24 << 20
	var peak uint64
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		peak = max(peak, m.HeapInuse)
		if m.HeapInuse > before.HeapInuse+bound {
			t.Fatalf("a stalled reader's heap grew by %d MiB (bound %d MiB) while the job wrote %d MiB",
				(m.HeapInuse-before.HeapInuse)>>20, bound>>20, total>>20)
		}
	}
	close(resume)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got != total {
		t.Fatalf("read %d bytes after the stall, want %d", got, total)
	}
	t.Logf("heap in use grew by at most %.1f MiB during the stall", float64(int64(peak)-int64(before.HeapInuse))/(1<<20))
}
