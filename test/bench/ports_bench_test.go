package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// startPortServers uploads the sandboxserver binary into sandbox id and
// starts its HTTP (127.0.0.1:8001) and TCP (127.0.0.1:9000) servers, then
// waits until both answer through the service.
func (s *service) startPortServers(ctx context.Context, b *testing.B, id string) {
	b.Helper()
	f, err := os.Open(filepath.Join(binDir(b), "sandboxserver"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	if _, err := s.client.WriteFile(ctx, id, "/workspace/sbserver", f, client.WriteFileOptions{Mode: "0755", Size: fi.Size()}); err != nil {
		b.Fatalf("upload: %v", err)
	}
	for _, argv := range [][]string{
		{"/workspace/sbserver", "wsecho", "-addr", "127.0.0.1:8001"},
		{"/workspace/sbserver", "tcp", "-addr", "127.0.0.1:9000"},
	} {
		if _, err := s.client.StartJob(ctx, id, client.ExecRequest{Command: argv}); err != nil {
			b.Fatalf("start %v: %v", argv, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := s.client.DialPort(ctx, id, 9000)
		if err == nil {
			c.Close()
			resp, err := s.http.Do(s.portRequest(ctx, id, 8001))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("servers in %s did not come up: %v", id, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *service) portRequest(ctx context.Context, id string, port int) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, "GET", s.url+client.PortPath(id, port), nil)
	req.Header.Set("Authorization", "Bearer "+s.key)
	return req
}

// BenchmarkPortProxy measures an HTTP request through the service's port
// proxy (client → service → agent stream → server on the sandbox's
// loopback, one kept-alive connection) against the same request made
// inside the sandbox (the sandboxserver's own client, also kept alive),
// and reports the overhead as the difference of the medians.
func BenchmarkPortProxy(b *testing.B) {
	s := startService(b)
	iters := envInt(b, "GENESIS_BENCH_PORT_ITERS", 1000)
	tbl := NewTable("runtime", "n", "direct p50 ms", "direct p99 ms", "proxied p50 ms", "proxied p99 ms", "overhead p50 ms", "req/s")
	s.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		sb, err := s.create(ctx, rt)
		if err != nil {
			b.Fatal(err)
		}
		defer s.remove(ctx, sb.ID)
		s.startPortServers(ctx, b, sb.ID)

		// Direct: inside the sandbox.
		dsum := Summarize(s.timesInSandbox(ctx, b, sb.ID, "/workspace/sbserver", "get", "-url", "http://127.0.0.1:8001/", "-n", strconv.Itoa(iters+20)))

		// Proxied: the same GET through the service.
		get := func() error {
			resp, err := s.http.Do(s.portRequest(ctx, sb.ID, 8001))
			if err != nil {
				return err
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			return nil
		}
		for range 20 {
			if err := get(); err != nil {
				b.Fatal(err)
			}
		}
		ps := make([]time.Duration, 0, iters)
		start := time.Now()
		for range iters {
			t0 := time.Now()
			if err := get(); err != nil {
				b.Fatal(err)
			}
			ps = append(ps, time.Since(t0))
		}
		rate := float64(iters) / time.Since(start).Seconds()
		psum := Summarize(ps)
		reportSummary(b, "proxied-", psum)
		b.ReportMetric(Ms(dsum.P50), "direct-p50-ms")
		b.ReportMetric(Ms(psum.P50-dsum.P50), "overhead-p50-ms")
		tbl.Row(rt, strconv.Itoa(iters), fmt.Sprintf("%.3f", Ms(dsum.P50)), fmt.Sprintf("%.3f", Ms(dsum.P99)),
			fmt.Sprintf("%.3f", Ms(psum.P50)), fmt.Sprintf("%.3f", Ms(psum.P99)), fmt.Sprintf("%.3f", Ms(psum.P50-dsum.P50)), fmt.Sprintf("%.0f", rate))
	})
	printTable("HTTP through the port proxy vs inside the sandbox", tbl)
}

// BenchmarkPortForward measures raw TCP throughput through the service
// (client.DialPort: a WebSocket to the service, an HTTP/2 stream to the
// agent, TCP on the sandbox's loopback), download and upload.
func BenchmarkPortForward(b *testing.B) {
	s := startService(b)
	mib := envInt(b, "GENESIS_BENCH_PORT_MIB", 512)
	n := int64(mib) << 20
	tbl := NewTable("runtime", "MiB", "download MiB/s", "upload MiB/s")
	s.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		sb, err := s.create(ctx, rt)
		if err != nil {
			b.Fatal(err)
		}
		defer s.remove(ctx, sb.ID)
		s.startPortServers(ctx, b, sb.ID)

		// Download: the server sends n bytes.
		conn, err := s.client.DialPort(ctx, sb.ID, 9000)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		fmt.Fprintf(conn, "send %d\n", n)
		got, err := io.CopyBuffer(io.Discard, io.LimitReader(conn, n), make([]byte, 256<<10))
		down := time.Since(t0)
		conn.Close()
		if err != nil || got != n {
			b.Fatalf("download: %d of %d bytes: %v", got, n, err)
		}

		// Upload: the server reads n bytes and answers their count.
		conn, err = s.client.DialPort(ctx, sb.ID, 9000)
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 256<<10)
		t0 = time.Now()
		fmt.Fprintf(conn, "sink %d\n", n)
		for sent := int64(0); sent < n; {
			k, err := conn.Write(buf[:min(int64(len(buf)), n-sent)])
			if err != nil {
				b.Fatalf("upload: %v after %d bytes", err, sent)
			}
			sent += int64(k)
		}
		line, err := bufio.NewReader(conn).ReadString('\n')
		up := time.Since(t0)
		conn.Close()
		if err != nil || strings.TrimSpace(line) != strconv.FormatInt(n, 10) {
			b.Fatalf("upload: the server counted %q: %v", line, err)
		}
		mbps := func(d time.Duration) float64 { return float64(n) / float64(1<<20) / d.Seconds() }
		b.ReportMetric(mbps(down), "download-MiB/s")
		b.ReportMetric(mbps(up), "upload-MiB/s")
		tbl.Row(rt, strconv.Itoa(mib), fmt.Sprintf("%.0f", mbps(down)), fmt.Sprintf("%.0f", mbps(up)))
	})
	printTable("TCP through the service (DialPort)", tbl)
}
