package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"genesis.dev/sandbox/client"
	sandboxv1 "genesis.dev/sandbox/gen/genesis/sandbox/v1"
)

// BenchmarkGRPCvsHTTP compares, per runtime and in the same run, the gRPC
// edge (grpc-go's client, HTTP/2 in cleartext) on its native listener
// (grpc_addr) with the HTTP API (HTTP/1.1 keep-alive): the round trip of an
// exec of `true` on one warm sandbox, the paths alternating call by call
// (GENESIS_BENCH_GRPC_ITERS each, default 300), beside the HTTP API over
// h2c and gRPC on the main listener (both net/http's HTTP/2) and gRPC on
// the native listener from a client with fixed flow-control windows, and a job's
// log streamed to a client (GENESIS_BENCH_GRPC_STREAM_MIB, default 256):
// followed live by each, then the finished log replayed.
func BenchmarkGRPCvsHTTP(b *testing.B) {
	s := startService(b)
	api := newRawAPI(b, s)
	iters := envInt(b, "GENESIS_BENCH_GRPC_ITERS", 300)
	total := int64(envInt(b, "GENESIS_BENCH_GRPC_STREAM_MIB", 256)) << 20
	const warmup = 10
	// gRPC on the native listener (grpc_addr), and on the main listener
	// beside HTTP (connect on net/http's HTTP/2).
	cc, err := grpc.NewClient("passthrough:///"+s.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	ccMain, err := grpc.NewClient("passthrough:///"+strings.TrimPrefix(s.url, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer ccMain.Close()
	// The native listener again, from a client whose flow-control windows
	// are fixed: no bandwidth-estimation PING (and WINDOW_UPDATE) after
	// every answer, so what the default client's frames cost the service.
	ccFixed, err := grpc.NewClient("passthrough:///"+s.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(1<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer ccFixed.Close()
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{Protocols: &protos, DisableCompression: true}}
	defer h2c.CloseIdleConnections()
	rtt := NewTable("runtime", "edge", "n", "p50 ms", "p90 ms", "p99 ms", "mean ms", "min ms", "max ms", "service CPU ms/call")
	thr := NewTable("runtime", "edge", "path", "MiB", "wall s", "MiB/s")
	s.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
		defer cancel()
		gctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+s.key)
		sb, err := s.createWith(ctx, rt, &client.Resources{MemoryMB: streamMemoryMB})
		if err != nil {
			b.Fatalf("create (%s): %v", rt, err)
		}
		defer func() {
			if err := s.remove(ctx, sb.ID); err != nil {
				b.Error(err)
			}
		}()
		httpExec := func() error {
			res, err := s.client.Exec(ctx, sb.ID, client.ExecRequest{Command: []string{"true"}})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("true exited %d", res.ExitCode)
			}
			return err
		}
		grpcExecOn := func(cc *grpc.ClientConn) func() error {
			return func() error {
				var res sandboxv1.ExecResult
				err := cc.Invoke(gctx, "/genesis.sandbox.v1.ExecService/Exec", &sandboxv1.ExecRequest{SandboxId: sb.ID, Command: []string{"true"}}, &res)
				if err == nil && res.ExitCode != 0 {
					err = fmt.Errorf("true exited %d", res.ExitCode)
				}
				return err
			}
		}
		grpcExec, grpcMainExec, grpcFixedExec := grpcExecOn(cc), grpcExecOn(ccMain), grpcExecOn(ccFixed)
		// The HTTP API again over HTTP/2 in cleartext (prior knowledge),
		// gRPC's transport: what the two edges' difference owes to HTTP/2.
		h2Exec := func() error {
			_, err := rawExecTrue(ctx, h2c, s, sb.ID)
			return err
		}
		for range warmup {
			if err := errors.Join(httpExec(), grpcExec(), h2Exec(), grpcMainExec(), grpcFixedExec()); err != nil {
				b.Fatalf("warm-up (%s): %v", rt, err)
			}
		}
		// Rounds of a block of calls per path, each round starting with the
		// next path, so that no path always follows the same one; the
		// service's CPU per call of each path from its threads' run time
		// (schedstat, in ns) over its blocks: less noisy than latency on a
		// shared host.
		paths := []struct {
			name string
			run  func() error
			took []time.Duration
			cpu  time.Duration
		}{{name: "http", run: httpExec}, {name: "grpc", run: grpcExec}, {name: "http-h2c", run: h2Exec}, {name: "grpc-main-h2c", run: grpcMainExec}, {name: "grpc-fixed-windows", run: grpcFixedExec}}
		const block = 10
		pid := s.cmd.Process.Pid
		for i := range (iters + block - 1) / block {
			for j := range paths {
				p := &paths[(i+j)%len(paths)]
				cpu0, err := threadsRunTime(pid)
				if err != nil {
					b.Fatal(err)
				}
				for range block {
					t0 := time.Now()
					if err := p.run(); err != nil {
						b.Fatalf("%s exec (%s): %v", p.name, rt, err)
					}
					p.took = append(p.took, time.Since(t0))
				}
				cpu1, err := threadsRunTime(pid)
				if err != nil {
					b.Fatal(err)
				}
				p.cpu += cpu1 - cpu0
			}
		}
		for _, p := range paths {
			row := struct {
				edge string
				s    Summary
			}{p.name, Summarize(p.took)}
			reportSummary(b, row.edge+"-", row.s)
			cpu := Ms(p.cpu) / float64(len(p.took))
			b.ReportMetric(cpu, row.edge+"-service-cpu-ms")
			rtt.Row(rt, row.edge, strconv.Itoa(row.s.N), FormatMs(row.s.P50), FormatMs(row.s.P90), FormatMs(row.s.P99), FormatMs(row.s.Mean), FormatMs(row.s.Min), FormatMs(row.s.Max),
				fmt.Sprintf("%.3f", cpu))
		}

		req, _, err := bulkJob(ctx, s, api, sb.ID, total)
		if err != nil {
			b.Fatal(err)
		}
		report := func(edge, path string, n int64, wall time.Duration) {
			rate := float64(n) / (1 << 20) / wall.Seconds()
			b.ReportMetric(rate, edge+"-"+path+"-MiB/s")
			thr.Row(rt, edge, path, strconv.FormatInt(n>>20, 10), fmt.Sprintf("%.2f", wall.Seconds()), fmt.Sprintf("%.0f", rate))
		}
		// HTTP: SSE, base64 (the default encoding).
		sse := func(jobID string, follow bool) (int64, time.Duration) {
			t := &tally{}
			start := time.Now()
			resp, err := api.logs(ctx, jobID, "", follow, "")
			if err == nil {
				err = t.readStream(resp)
			}
			if err == nil && t.decoded() != total {
				err = fmt.Errorf("decoded %d bytes, want %d", t.decoded(), total)
			}
			if err != nil {
				b.Fatalf("SSE (%s): %v", rt, err)
			}
			return t.decoded(), t.exitAt.Sub(start)
		}
		// gRPC: StreamJobLogs.
		stream := func(jobID string, follow bool) (int64, time.Duration) {
			start := time.Now()
			n, err := grpcLog(gctx, cc, jobID, follow)
			if err == nil && n != total {
				err = fmt.Errorf("received %d bytes, want %d", n, total)
			}
			if err != nil {
				b.Fatalf("StreamJobLogs (%s): %v", rt, err)
			}
			return n, time.Since(start)
		}
		start := func() string {
			j, err := api.startJob(ctx, sb.ID, req)
			if err != nil {
				b.Fatal(err)
			}
			return j.ID
		}
		hj := start()
		n, wall := sse(hj, true)
		report("http", "follow", n, wall)
		if _, err := s.waitFinal(ctx, hj); err != nil {
			b.Fatal(err)
		}
		gj := start()
		n, wall = stream(gj, true)
		report("grpc", "follow", n, wall)
		if _, err := s.waitFinal(ctx, gj); err != nil {
			b.Fatal(err)
		}
		n, wall = sse(gj, false)
		report("http", "replay", n, wall)
		n, wall = stream(gj, false)
		report("grpc", "replay", n, wall)
	})
	printTable(fmt.Sprintf("exec `true` round trip, HTTP and gRPC alternating, after %d warm-ups each, ms", warmup), rtt)
	printTable(fmt.Sprintf("a job's log to one client, %d MiB of log lines (%s): follow live from a background start; replay the finished log", total>>20, profile), thr)
}

// grpcLog reads a job's log over StreamJobLogs from the start to its end
// and counts the output bytes; it checks each stream's offsets continue.
func grpcLog(ctx context.Context, cc *grpc.ClientConn, jobID string, follow bool) (int64, error) {
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/genesis.sandbox.v1.ExecService/StreamJobLogs")
	if err != nil {
		return 0, err
	}
	if err := st.SendMsg(&sandboxv1.StreamJobLogsRequest{JobId: jobID, Follow: &follow}); err != nil {
		return 0, err
	}
	if err := st.CloseSend(); err != nil {
		return 0, err
	}
	var next [2]int64
	exited := false
	for {
		var ev sandboxv1.JobLogEvent
		err := st.RecvMsg(&ev)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return next[0] + next[1], err
		}
		var out *sandboxv1.Output
		i := 0
		switch x := ev.Event.(type) {
		case *sandboxv1.JobLogEvent_Stdout:
			out = x.Stdout
		case *sandboxv1.JobLogEvent_Stderr:
			out, i = x.Stderr, 1
		case *sandboxv1.JobLogEvent_Exit:
			exited = true
		}
		if out != nil {
			if out.Offset != next[i] {
				return 0, fmt.Errorf("output at %d, want %d", out.Offset, next[i])
			}
			next[i] += int64(len(out.Data))
		}
	}
	if !exited {
		return 0, errors.New("the stream ended without an exit event")
	}
	return next[0] + next[1], nil
}

// threadsRunTime is the CPU time all threads of process pid have run so
// far, from each thread's schedstat (nanoseconds, unlike /proc/pid/stat's
// 10 ms ticks). A thread that ended in between is not counted.
func threadsRunTime(pid int) (time.Duration, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			continue // the thread ended
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			return 0, fmt.Errorf("%s/%s/schedstat: malformed", dir, t.Name())
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s/%s/schedstat: %v", dir, t.Name(), err)
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}
