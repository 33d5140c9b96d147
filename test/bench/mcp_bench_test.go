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
	"slices"
	"strconv"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/testenv"
)

// mcpCatalog is a catalog of the fixture server (in /workspace, uploaded
// by the benchmark) as a verified entry, so that it may run under runc too.
const mcpCatalog = `mcp:
  catalog:
    - {name: fixture, source: verified, command: ["/workspace/mcpfixture", "serve"]}
`

// mcpInstance is what the benchmarks read of an instance.
type mcpInstance struct {
	ID       string `json:"id"`
	Endpoint string `json:"endpoint"`
	Token    string `json:"token"`
	Runtime  string `json:"runtime"`
	LeaseID  string `json:"lease_id"`
	State    string `json:"state"`
}

func (s *service) apiJSON(ctx context.Context, method, path string, body, out any) (int, string, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, "", err
		}
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(ctx, method, s.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, string(b), err
		}
	}
	return resp.StatusCode, string(b), nil
}

type bearerRT struct {
	token string
	next  http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// BenchmarkMCPToolCall measures tools/call (echo) through the service —
// an unmodified Go SDK client → Streamable HTTP endpoint → the proxy →
// the server's stdin stream in the sandbox → its stdout back through the
// job log — against the same call made directly over stdio by a Go SDK
// client inside the same sandbox (the fixture's bench mode), and reports
// the overhead as the difference of the medians. With
// GENESIS_BENCH_BASELINE_BIN a second service runs that build, with an
// instance of its own, and its calls alternate with this build's, call by
// call (each first every other time), so that both see the same machine.
func BenchmarkMCPToolCall(b *testing.B) {
	s := startServiceWith(b, mcpCatalog)
	var base *service
	if dir := baselineDir(b); dir != "" {
		base = startServiceIn(b, dir, mcpCatalog)
	}
	iters := envInt(b, "GENESIS_BENCH_MCP_ITERS", 1000)
	tbl := NewTable("runtime", "build", "n", "direct p50 ms", "direct p99 ms", "service p50 ms", "service p99 ms", "overhead p50 ms", "calls/s")
	s.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		type build struct {
			name    string
			s       *service
			cs      *sdk.ClientSession
			samples []time.Duration
			busy    time.Duration
		}
		builds := []*build{{name: "this build", s: s}}
		if base != nil {
			if !slices.Contains(base.runtimes, rt) {
				b.Skipf("runtime %s is not usable for %s by the baseline", rt, profile)
			}
			builds = append(builds, &build{name: baselineLabel(), s: base})
		}
		var dsum Summary
		for i, bd := range builds {
			lease, err := bd.s.client.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: profile, Runtime: rt, RiskLevel: map[string]string{"runc": "low", "runsc": "high"}[rt]})
			if err != nil {
				b.Fatalf("%s: %v", bd.name, err)
			}
			defer bd.s.client.ReleaseLease(context.Background(), lease.LeaseID)
			f, err := os.Open(filepath.Join(binDir(b), "mcpfixture"))
			if err != nil {
				b.Fatal(err)
			}
			fi, _ := f.Stat()
			_, err = bd.s.client.WriteFile(ctx, lease.SandboxID, "/workspace/mcpfixture", f, client.WriteFileOptions{Mode: "0755", Size: fi.Size()})
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
			if i == 0 {
				// Direct: a stdio client inside this build's sandbox.
				dsum = Summarize(s.timesInSandbox(ctx, b, lease.SandboxID, "/workspace/mcpfixture", "-n", strconv.Itoa(iters+20), "bench"))
			}
			// Through the service.
			cs, done := bd.s.mcpSession(ctx, b, map[string]any{"catalog": "fixture", "lease_id": lease.LeaseID})
			defer done()
			bd.cs = cs
		}
		call := func(bd *build, i int) error {
			r, err := bd.cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": strconv.Itoa(i)}})
			if err != nil {
				return fmt.Errorf("%s: %w", bd.name, err)
			}
			if r.IsError {
				return fmt.Errorf("%s: tool error", bd.name)
			}
			return nil
		}
		for i := range 20 {
			for _, bd := range builds {
				if err := call(bd, i); err != nil {
					b.Fatal(err)
				}
			}
		}
		for i := range iters {
			for k := range builds {
				bd := builds[(i+k)%len(builds)]
				t0 := time.Now()
				if err := call(bd, i); err != nil {
					b.Fatal(err)
				}
				d := time.Since(t0)
				bd.samples, bd.busy = append(bd.samples, d), bd.busy+d
			}
		}
		sums := make([]Summary, len(builds))
		for i, bd := range builds {
			psum := Summarize(bd.samples)
			sums[i] = psum
			rate := float64(len(bd.samples)) / bd.busy.Seconds()
			tbl.Row(rt, bd.name, strconv.Itoa(iters), fmt.Sprintf("%.3f", Ms(dsum.P50)), fmt.Sprintf("%.3f", Ms(dsum.P99)),
				fmt.Sprintf("%.3f", Ms(psum.P50)), fmt.Sprintf("%.3f", Ms(psum.P99)), fmt.Sprintf("%.3f", Ms(psum.P50-dsum.P50)), fmt.Sprintf("%.0f", rate))
		}
		psum := sums[0]
		reportSummary(b, "service-", psum)
		b.ReportMetric(Ms(dsum.P50), "direct-p50-ms")
		b.ReportMetric(Ms(psum.P50-dsum.P50), "overhead-p50-ms")
		tr := MsRow(7, "MCP tools/call (echo)", rt, psum)
		tr.Compare = []Compared{{"direct stdio call in the sandbox", Ms(dsum.P50)}}
		tr.Note = fmt.Sprintf("overhead over direct p50 %.2f ms", Ms(psum.P50-dsum.P50))
		var bsum Summary
		if len(sums) > 1 {
			bsum = sums[1]
			tr.Note += fmt.Sprintf(" (%s %.2f)", baselineLabel(), Ms(bsum.P50-dsum.P50))
		}
		judgeNoRegression(&tr, psum, bsum, baselineLabel())
		recordTarget(tr)
	})
	printTable("MCP tools/call through the service vs a direct stdio call in the sandbox (calls/s: while calling)", tbl)
}

// mcpSession creates an instance from req and connects an MCP client to
// its endpoint; done closes the client and deletes the instance.
func (s *service) mcpSession(ctx context.Context, b *testing.B, req map[string]any) (*sdk.ClientSession, func()) {
	b.Helper()
	var inst mcpInstance
	if code, body, err := s.apiJSON(ctx, "POST", "/v1/mcp/servers", req, &inst); err != nil || code != 201 {
		b.Fatalf("create %v: %d %s %v", req, code, body, err)
	}
	del := func() { s.apiJSON(context.Background(), "DELETE", "/v1/mcp/servers/"+inst.ID, nil, nil) }
	c := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: s.url + inst.Endpoint,
		HTTPClient: &http.Client{Transport: bearerRT{inst.Token, s.http.Transport}}}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		del()
		b.Fatal(err)
	}
	return cs, func() { cs.Close(); del() }
}

// BenchmarkMCPColdStart measures POST /v1/mcp/servers until it answers
// with a ready instance (its own lease from a warm pool, the server process
// started and initialized), for a Python stdio server present in the
// image; each instance is deleted outside the timed section and the next
// starts once the pool has settled again.
func BenchmarkMCPColdStart(b *testing.B) {
	s := startServiceWith(b, mcpPyConfig(b))
	iters := envInt(b, "GENESIS_BENCH_MCP_COLD_ITERS", 30)
	tbl := NewTable("runtime", "n", "p50 ms", "p99 ms", "max ms")
	s.eachRuntime(b, func(b *testing.B, rt string) {
		entry := map[string]string{"runc": "py-low", "runsc": "py-high"}[rt]
		pool := "mcp-py-" + rt
		var ds []time.Duration
		for range iters {
			s.waitSettled(b, pool)
			ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
			var inst mcpInstance
			t0 := time.Now()
			code, body, err := s.apiJSON(ctx, "POST", "/v1/mcp/servers", map[string]any{"catalog": entry}, &inst)
			d := time.Since(t0)
			if err != nil || code != 201 || inst.State != "ready" || inst.Runtime != rt {
				cancel()
				b.Fatalf("create: %d %s %v", code, body, err)
			}
			ds = append(ds, d)
			s.apiJSON(ctx, "DELETE", "/v1/mcp/servers/"+inst.ID, nil, nil)
			cancel()
		}
		sum := Summarize(ds)
		reportSummary(b, "cold-", sum)
		tbl.Row(rt, strconv.Itoa(iters), FormatMs(sum.P50), FormatMs(sum.P99), FormatMs(sum.Max))
	})
	printTable("MCP instance cold start (POST /v1/mcp/servers → ready, warm pool)", tbl)
}

// mcpPyConfig is a service config with the Python fixture server in a
// pooled profile, as py-low (runc) and py-high (runsc).
func mcpPyConfig(b *testing.B) string {
	script, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(b), "test", "mcpfixture", "server.py"))
	if err != nil {
		b.Fatal(err)
	}
	cmd, _ := json.Marshal([]string{"python3", "-c", string(script)})
	return "warm_pools: true\nprofiles:\n" + pooledProfileOf("mcp-py", "code-python-basic", 2, 4) +
		pooledProfileOf(profile, profile, 0, 4) +
		"mcp:\n  catalog:\n" +
		"    - {name: py-low, source: verified, profile: mcp-py, command: " + string(cmd) + "}\n" +
		"    - {name: py-high, source: unverified, profile: mcp-py, command: " + string(cmd) + "}\n"
}

// BenchmarkMCPEphemeralCall measures a tools/call of a scope ephemeral
// instance (a sandbox from the warm pool, the server started and
// initialized, the call, the lease released) against the same call of a
// dedicated instance, in the same run. Each ephemeral call starts once
// the pool has settled again.
func BenchmarkMCPEphemeralCall(b *testing.B) {
	s := startServiceWith(b, mcpPyConfig(b))
	iters := envInt(b, "GENESIS_BENCH_MCP_EPHEMERAL_ITERS", 30)
	tbl := NewTable("runtime", "n", "dedicated p50 ms", "dedicated p99 ms", "ephemeral p50 ms", "ephemeral p99 ms")
	s.eachRuntime(b, func(b *testing.B, rt string) {
		entry := map[string]string{"runc": "py-low", "runsc": "py-high"}[rt]
		pool := "mcp-py-" + rt
		measure := func(scope string) Summary {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			s.waitSettled(b, pool)
			cs, done := s.mcpSession(ctx, b, map[string]any{"catalog": entry, "scope": scope})
			defer done()
			var ds []time.Duration
			for i := range iters {
				s.waitSettled(b, pool)
				t0 := time.Now()
				r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": strconv.Itoa(i)}})
				d := time.Since(t0)
				if err != nil || r.IsError {
					b.Fatalf("%s call: %v %+v", scope, err, r)
				}
				ds = append(ds, d)
			}
			return Summarize(ds)
		}
		ded, eph := measure("dedicated"), measure("ephemeral")
		reportSummary(b, "ephemeral-", eph)
		b.ReportMetric(Ms(ded.P50), "dedicated-p50-ms")
		tbl.Row(rt, strconv.Itoa(iters), FormatMs(ded.P50), FormatMs(ded.P99), FormatMs(eph.P50), FormatMs(eph.P99))
	})
	printTable("MCP tools/call, scope ephemeral (a sandbox and server per call) vs dedicated", tbl)
}
