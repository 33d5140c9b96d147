package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/egress"
)

// BenchmarkProxyPath measures what the gateway adds to a connection on
// loopback, against the same upstream reached directly:
//
//   - connect+GET: a new TCP connection, one small HTTP request and its
//     answer, closed (what a sandbox pays per connection: the gateway reads
//     the request head, decides, dials, replays and splices);
//   - keep-alive GET: one more request on an open connection (the splice
//     alone);
//   - download: MiB/s of one large body over one connection.
//
// Iterations: GENESIS_BENCH_EGRESS_ITERS (default 2000) and
// GENESIS_BENCH_EGRESS_MIB (default 512). Run with -benchtime 1x.
func BenchmarkProxyPath(b *testing.B) {
	iters := benchEnv(b, "GENESIS_BENCH_EGRESS_ITERS", 2000)
	mib := benchEnv(b, "GENESIS_BENCH_EGRESS_MIB", 512)
	chunk := make([]byte, 256<<10)
	web := startUpstream(b, func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("bytes"))
		if n == 0 {
			w.Write([]byte("ok"))
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(n))
		for n > 0 {
			k, err := w.Write(chunk[:min(n, len(chunk))])
			if err != nil {
				return
			}
			n -= k
		}
	}, "web.test")
	g := startGateway(b, nil)
	ip := loopbackAddr()
	g.put(b, "sb-bench", ip, egress.OperatorConfig{StaticHosts: map[string]string{"web.test": web.addr.String()}},
		egress.Policy{Mode: egress.ModeAllowlist, Allow: []egress.Rule{{Host: "web.test", Ports: []int{80}}}})
	paths := []struct {
		name string
		addr netip.AddrPort
	}{
		{"direct", netip.AddrPortFrom(web.addr, 80)},
		{"gateway", netip.AddrPortFrom(ip, egress.PortHTTP)},
	}
	for range b.N {
		fmt.Printf("\negress proxy path on loopback (%d connections, %d MiB download)\n", iters, mib)
		fmt.Printf("%-8s %-14s %10s %10s %10s\n", "path", "measure", "p50 ms", "p99 ms", "MiB/s")
		for _, p := range paths {
			conn := make([]time.Duration, 0, iters)
			for range iters {
				t0 := time.Now()
				c, err := net.Dial("tcp", p.addr.String())
				if err != nil {
					b.Fatal(err)
				}
				if err := oneRequest(c, bufio.NewReader(c), "/", true); err != nil {
					b.Fatalf("%s: %v", p.name, err)
				}
				c.Close()
				conn = append(conn, time.Since(t0))
			}
			c, err := net.Dial("tcp", p.addr.String())
			if err != nil {
				b.Fatal(err)
			}
			br := bufio.NewReader(c)
			keep := make([]time.Duration, 0, iters)
			for range iters {
				t0 := time.Now()
				if err := oneRequest(c, br, "/", false); err != nil {
					b.Fatalf("%s keep-alive: %v", p.name, err)
				}
				keep = append(keep, time.Since(t0))
			}
			c.Close()
			t0 := time.Now()
			c, err = net.Dial("tcp", p.addr.String())
			if err != nil {
				b.Fatal(err)
			}
			if err := oneRequest(c, bufio.NewReaderSize(c, 256<<10), "/?bytes="+strconv.Itoa(mib<<20), true); err != nil {
				b.Fatalf("%s download: %v", p.name, err)
			}
			c.Close()
			rate := float64(mib) / time.Since(t0).Seconds()
			cp50, cp99 := pct(conn, 0.5), pct(conn, 0.99)
			kp50, kp99 := pct(keep, 0.5), pct(keep, 0.99)
			fmt.Printf("%-8s %-14s %10.3f %10.3f %10s\n", p.name, "connect+GET", cp50, cp99, "")
			fmt.Printf("%-8s %-14s %10.3f %10.3f %10s\n", p.name, "keep-alive GET", kp50, kp99, "")
			fmt.Printf("%-8s %-14s %10s %10s %10.0f\n", p.name, "download", "", "", rate)
			b.ReportMetric(cp50, p.name+"-connect-p50-ms")
			b.ReportMetric(cp99, p.name+"-connect-p99-ms")
			b.ReportMetric(kp50, p.name+"-keepalive-p50-ms")
			b.ReportMetric(kp99, p.name+"-keepalive-p99-ms")
			b.ReportMetric(rate, p.name+"-MiB/s")
		}
	}
}

// oneRequest sends GET path with Host web.test and reads the whole answer.
func oneRequest(c net.Conn, br *bufio.Reader, path string, closeConn bool) error {
	hdr := "GET " + path + " HTTP/1.1\r\nHost: web.test\r\n"
	if closeConn {
		hdr += "Connection: close\r\n"
	}
	if _, err := io.WriteString(c, hdr+"\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = fmt.Errorf("short body: %d of %d", n, resp.ContentLength)
	}
	return err
}

func pct(samples []time.Duration, p float64) float64 {
	s := slices.Clone(samples)
	slices.Sort(s)
	return float64(s[min(len(s)-1, int(p*float64(len(s))))]) / float64(time.Millisecond)
}

func benchEnv(b *testing.B, name string, def int) int {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
