package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// execHops are the hops of the service's Server-Timing header
// (httpapi.Config.ServerTiming), in the order it writes them.
var execHops = []string{"pre", "attach", "record", "agent", "finish", "handler"}

// execParts are the parts of record and finish in the Server-Timing
// header; a build that does not write them (an older baseline) shows 0.
var execParts = []string{"rec-job", "rec-trace", "rec-log", "fin-job", "fin-trace", "fin-log"}

// BenchmarkExecHops measures, per runtime, sequential execs of `true`
// through the HTTP API on one running sandbox (GENESIS_BENCH_EXEC_ITERS,
// default 500) and where their time goes: the service runs with
// GENESIS_SERVER_TIMING=1 and answers each exec with a Server-Timing header
// (pre: routing, key check and body; attach; record; agent; finish;
// handler: all of it inside the root handler); "outside" is the client's
// round trip less the handler: the connection, HTTP parsing and writing,
// the audit record (written after the handler's answer, before the
// response is flushed) and the client. With GENESIS_BENCH_BASELINE_BIN (a
// sandbox-service binary of an earlier build, with its genesis-agent and
// genesis-egress beside it, as make bench-speed builds them) a second
// service runs that build, and the two are called alternately, call by call, each on a
// sandbox of its own, so that both see the same machine load.
func BenchmarkExecHops(b *testing.B) {
	b.Setenv("GENESIS_SERVER_TIMING", "1")
	s := startService(b)
	var base *service
	if bin := os.Getenv("GENESIS_BENCH_BASELINE_BIN"); bin != "" {
		base = startServiceIn(b, filepath.Dir(bin), "")
	}
	iters := envInt(b, "GENESIS_BENCH_EXEC_ITERS", 500)
	const warmup = 20
	rtt := NewTable("runtime", "build", "n", "p50 ms", "p90 ms", "p99 ms", "mean ms", "min ms", "max ms")
	hops := NewTable(append([]string{"runtime", "percentile"}, append(execHops, "outside", "total")...)...)
	parts := NewTable(append([]string{"runtime", "build", "percentile", "record", "finish"}, execParts...)...)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute, DisableCompression: true}}
	defer hc.CloseIdleConnections()
	s.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		type target struct {
			name string
			s    *service
			id   string
			rtt  []time.Duration
		}
		targets := []*target{{name: "current", s: s}}
		if base != nil {
			targets = append(targets, &target{name: "baseline", s: base})
		}
		for _, t := range targets {
			sb, err := t.s.create(ctx, rt)
			if err != nil {
				b.Fatalf("create (%s, %s): %v", t.name, rt, err)
			}
			t.id = sb.ID
			defer func() {
				if err := t.s.remove(ctx, t.id); err != nil {
					b.Error(err)
				}
			}()
		}
		perHop := make(map[string][]time.Duration)
		baseParts := make(map[string][]time.Duration)
		for i := range warmup + iters {
			for _, t := range targets {
				t0 := time.Now()
				timing, err := rawExecTrue(ctx, hc, t.s, t.id)
				d := time.Since(t0)
				if err != nil {
					b.Fatalf("exec (%s, %s): %v", t.name, rt, err)
				}
				if i < warmup {
					continue
				}
				t.rtt = append(t.rtt, d)
				if t.s != s {
					// A baseline that writes the parts too (one built
					// from this commit's parent) shows them beside ours.
					if m, err := parseServerTiming(timing); err == nil && strings.Contains(timing, execParts[0]) {
						for _, h := range append([]string{"record", "finish"}, execParts...) {
							baseParts[h] = append(baseParts[h], m[h])
						}
					}
					continue
				}
				m, err := parseServerTiming(timing)
				if err != nil {
					b.Fatal(err)
				}
				for _, h := range append(execHops, execParts...) {
					perHop[h] = append(perHop[h], m[h])
				}
				perHop["outside"] = append(perHop["outside"], d-m["handler"])
				perHop["total"] = append(perHop["total"], d)
			}
		}
		for _, t := range targets {
			sum := Summarize(t.rtt)
			prefix := ""
			if t.s != s {
				prefix = "baseline-"
			}
			reportSummary(b, prefix, sum)
			rtt.Row(rt, t.name, strconv.Itoa(sum.N), FormatMs(sum.P50), FormatMs(sum.P90), FormatMs(sum.P99), FormatMs(sum.Mean), FormatMs(sum.Min), FormatMs(sum.Max))
		}
		for _, p := range []struct {
			name string
			of   func(Summary) time.Duration
		}{{"p50", func(s Summary) time.Duration { return s.P50 }}, {"p90", func(s Summary) time.Duration { return s.P90 }}, {"p99", func(s Summary) time.Duration { return s.P99 }}} {
			row := []string{rt, p.name}
			for _, h := range append(execHops, "outside", "total") {
				sum := Summarize(perHop[h])
				row = append(row, FormatMs(p.of(sum)))
				if p.name == "p50" {
					b.ReportMetric(Ms(sum.P50), h+"-p50-ms")
				}
			}
			hops.Row(row...)
			for _, build := range []struct {
				name string
				of   map[string][]time.Duration
			}{{"current", perHop}, {"baseline", baseParts}} {
				if len(build.of[execParts[0]]) == 0 {
					continue
				}
				row = []string{rt, build.name, p.name}
				for _, h := range append([]string{"record", "finish"}, execParts...) {
					row = append(row, FormatMs(p.of(Summarize(build.of[h]))))
				}
				parts.Row(row...)
			}
		}
	})
	printTable("exec `true` round trip over HTTP, alternating builds call by call, ms", rtt)
	printTable("where an exec's time goes (current build; Server-Timing), ms; each column is its own percentile", hops)
	printTable("the parts of record and finish (Server-Timing; the baseline's if it writes them), ms; each column is its own percentile", parts)
}

// rawExecTrue runs `true` in sandbox id over the HTTP API and returns the
// answer's Server-Timing header.
func rawExecTrue(ctx context.Context, hc *http.Client, s *service, id string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v1/sandboxes/"+id+"/exec", bytes.NewReader([]byte(`{"command":["true"]}`)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("exec: %s: %s", resp.Status, body)
	}
	var res struct {
		ExitCode int `json:"exit_code"`
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("true exited %d", res.ExitCode)
	}
	return resp.Header.Get("Server-Timing"), nil
}

// parseServerTiming reads "name;dur=ms, …" into durations; every hop of
// execHops must be there.
func parseServerTiming(h string) (map[string]time.Duration, error) {
	m := map[string]time.Duration{}
	for part := range strings.SplitSeq(h, ",") {
		name, dur, ok := strings.Cut(strings.TrimSpace(part), ";dur=")
		if !ok {
			continue
		}
		ms, err := strconv.ParseFloat(dur, 64)
		if err != nil {
			return nil, fmt.Errorf("Server-Timing %q: %v", h, err)
		}
		m[name] = time.Duration(ms * float64(time.Millisecond))
	}
	for _, hop := range execHops {
		if _, ok := m[hop]; !ok {
			return nil, fmt.Errorf("Server-Timing %q has no %s (is GENESIS_SERVER_TIMING honoured?)", h, hop)
		}
	}
	return m, nil
}
