package agent_test

import (
	"context"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// BenchmarkPortSplice times one small request and its answer (128 bytes
// each way, a DevTools command's size) through the agent's raw port dial
// (the splice the service's DevTools connection takes), per runtime, to an
// echo service on the sandbox's loopback (testdata/portecho):
//
//   - splice: through this build's agent, back to back;
//   - splice-idle: the same after IdleMs (300 ms) of idleness, when the
//     agent's threads have gone to sleep;
//   - base, base-idle: the same through the agent of another build in a
//     twin container (GENESIS_AGENT_BENCH_BASE=REV or
//     GENESIS_AGENT_BENCH_BASE_BIN, as for BenchmarkExecFloor), each call
//     alternating with this build's, the order rotating each round;
//   - direct, direct-idle: the same exchange made inside this build's
//     container by a client on the sandbox's loopback, without the agent
//     (run after the interleaved rounds);
//   - cpu: the CPU time each container used per round.
//
// b.N is the number of back-to-back rounds; GENESIS_AGENT_BENCH_IDLE_ROUNDS
// (default 30) the number of rounds after idleness. Latencies are p50 and
// p90 in ms:
//
//	GENESIS_AGENT_BENCH_BASE=main go test -run '^$' -bench BenchmarkPortSplice -benchtime 300x ./internal/agent/
func BenchmarkPortSplice(b *testing.B) {
	const idle = 300 * time.Millisecond
	idleRounds := 30
	if v := os.Getenv("GENESIS_AGENT_BENCH_IDLE_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("GENESIS_AGENT_BENCH_IDLE_ROUNDS=%q: want a positive number", v)
		}
		idleRounds = n
	}
	baseDir := baseAgentDir(b)
	echoDir := testProgramDir(b, "echo", "portecho")
	for _, rt := range []string{"runc", "runsc"} {
		b.Run(rt, func(b *testing.B) {
			if !slices.Contains(runtimesUnderTest(b), rt) {
				b.Skipf("docker runtime %s not configured", rt)
			}
			args := []string{"--env", "GENESIS_AGENT_LOG_LEVEL=info", "-v", echoDir + ":/.echo:ro"}
			type row struct {
				name string
				c    *sandboxContainer
				conn net.Conn
				d    []time.Duration
				idle []time.Duration
			}
			rows := []*row{{name: "splice", c: startContainer(b, rt, args...)}}
			if baseDir != "" {
				rows = append(rows, &row{name: "base", c: startContainerFrom(b, rt, baseDir, args...)})
			}
			for _, r := range rows {
				r.conn = dialEcho(b, r.c)
				defer r.conn.Close()
			}
			msg, got := make([]byte, 128), make([]byte, 128)
			exchange := func(r *row) time.Duration {
				start := time.Now()
				if _, err := r.conn.Write(msg); err != nil {
					b.Fatalf("%s: %v", r.name, err)
				}
				if _, err := io.ReadFull(r.conn, got); err != nil {
					b.Fatalf("%s: %v", r.name, err)
				}
				return time.Since(start)
			}
			for range 10 {
				for _, r := range rows {
					exchange(r)
				}
			}
			curCPU := cpuUsage(rows[0].c)
			var baseCPU func() (time.Duration, bool)
			if len(rows) > 1 {
				baseCPU = cpuUsage(rows[1].c)
			}
			b.ResetTimer()
			for i := range b.N {
				for k := range rows {
					r := rows[(i+k)%len(rows)]
					r.d = append(r.d, exchange(r))
				}
			}
			for i := range idleRounds {
				for k := range rows {
					r := rows[(i+k)%len(rows)]
					time.Sleep(idle)
					r.idle = append(r.idle, exchange(r))
				}
			}
			b.StopTimer()
			if d, ok := curCPU(); ok {
				b.ReportMetric(float64(d.Microseconds())/float64(b.N+idleRounds), "splice-cpu-µs/round")
			}
			if baseCPU != nil {
				if d, ok := baseCPU(); ok {
					b.ReportMetric(float64(d.Microseconds())/float64(b.N+idleRounds), "base-cpu-µs/round")
				}
			}
			report := func(name string, d []time.Duration) {
				slices.Sort(d)
				b.ReportMetric(ms(d[len(d)/2]), name+"-p50-ms")
				b.ReportMetric(ms(d[len(d)*9/10]), name+"-p90-ms")
			}
			for _, r := range rows {
				report(r.name, r.d)
				report(r.name+"-idle", r.idle)
			}
			out, err := dockerCmd(5*time.Minute, nil, "exec", rows[0].c.id, "/.echo/portecho", "probe", "8000",
				strconv.Itoa(max(b.N, 20)), strconv.Itoa(idleRounds), strconv.Itoa(int(idle.Milliseconds())))
			if err != nil {
				b.Fatal(err)
			}
			for _, line := range strings.Split(out, "\n") {
				f := strings.Fields(line)
				if len(f) != 3 {
					b.Fatalf("portecho printed %q", line)
				}
				for j, q := range []string{"p50", "p90"} {
					us, err := strconv.Atoi(f[1+j])
					if err != nil {
						b.Fatalf("portecho printed %q", line)
					}
					b.ReportMetric(float64(us)/1000, f[0]+"-"+q+"-ms")
				}
			}
		})
	}
}

// dialEcho starts testdata/portecho's echo service on port 8000 of c's
// loopback and dials it raw through c's agent.
func dialEcho(tb testing.TB, c *sandboxContainer) net.Conn {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.client.StartJob(ctx, agentproto.JobStartRequest{ExecRequest: agentproto.ExecRequest{
		JobID: "echo", Command: []string{"/.echo/portecho", "serve", "8000"},
	}}); err != nil {
		tb.Fatal(err)
	}
	for {
		conn, err := c.client.DialPortRaw(ctx, 8000)
		if err == nil {
			return conn
		}
		if errdefs.Code(err) != agentproto.CodePortUnreachable || ctx.Err() != nil {
			tb.Fatalf("dial the echo service: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDialPortRawInContainers: the raw dial's splice under runc and runsc
// carries small exchanges and large transfers, ends as it should (the
// caller's CloseWrite reaches the service, whose close ends the caller's
// reads), and 100 splices opened at once and closed leave the agent with
// the threads and file descriptors it had.
func TestDialPortRawInContainers(t *testing.T) {
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			if !slices.Contains(runtimesUnderTest(t), rt) {
				t.Skipf("docker runtime %s not configured", rt)
			}
			c := startContainer(t, rt, "-v", testProgramDir(t, "echo", "portecho")+":/.echo:ro")
			conn := dialEcho(t, c)
			conn.SetDeadline(time.Now().Add(60 * time.Second))
			got := make([]byte, 128)
			for i := range 20 {
				msg := []byte(strings.Repeat(strconv.Itoa(i%10), 128))
				if _, err := conn.Write(msg); err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(conn, got); err != nil || string(got) != string(msg) {
					t.Fatalf("exchange %d: read %q, %v", i, got, err)
				}
			}
			// Large both ways; CloseWrite reaches the echo service as EOF,
			// its close ends our reads.
			roundTrip(t, conn, randomBytes(t, 4<<20))
			conn.Close()

			threads0, fds0 := agentThreadsFDs(t, c)
			conns := make([]net.Conn, 100)
			for i := range conns {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				nc, err := c.client.DialPortRaw(ctx, 8000)
				cancel()
				if err != nil {
					t.Fatalf("dial %d: %v", i, err)
				}
				conns[i] = nc
			}
			for i, nc := range conns {
				nc.SetDeadline(time.Now().Add(30 * time.Second))
				if _, err := nc.Write([]byte("ping")); err != nil {
					t.Fatalf("splice %d: %v", i, err)
				}
				if _, err := io.ReadFull(nc, got[:4]); err != nil || string(got[:4]) != "ping" {
					t.Fatalf("splice %d: read %q, %v", i, got[:4], err)
				}
			}
			for _, nc := range conns {
				nc.Close()
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				threads, fds := agentThreadsFDs(t, c)
				// Threads the runtime started for other work may stay
				// parked; none may stay per splice.
				if threads <= threads0+10 && fds <= fds0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after 100 splices the agent has %d threads (had %d), %d fds (had %d)", threads, threads0, fds, fds0)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
}

// agentThreadsFDs reads the thread and open file counts of c's agent (its
// PID 1), as the sandbox's kernel sees them.
func agentThreadsFDs(t *testing.T, c *sandboxContainer) (threads, fds int) {
	t.Helper()
	out, err := dockerCmd(30*time.Second, nil, "exec", c.id, "sh", "-c", "grep ^Threads: /proc/1/status; ls /proc/1/fd | wc -l")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(out)
	if len(f) != 3 {
		t.Fatalf("threads and fds of the agent: %q", out)
	}
	threads, err1 := strconv.Atoi(f[1])
	fds, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		t.Fatalf("threads and fds of the agent: %q", out)
	}
	return threads, fds
}
