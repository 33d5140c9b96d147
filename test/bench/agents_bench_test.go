package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkAgentsExecRoundTrip measures one exec of `true` — the round
// trip an agent pays per command — in one held runc sandbox of one
// service, by the three paths agents take: plain HTTP (Go net/http, POST
// /v1/sandboxes/{id}/exec), the service's MCP server (tools/call exec
// through the Go MCP SDK's client at /v1/mcp/sandbox) and the Python SDK
// (agents_exec.py, Genesis.exec, with Debian's python3 and httpx). Each
// path runs its warm-up, then GENESIS_BENCH_AGENTS_ITERS (default 300)
// timed calls, one at a time; the table gives p50, p90 and p99.
//
//	go test -run '^$' -bench BenchmarkAgentsExecRoundTrip -benchtime 1x ./test/bench/
func BenchmarkAgentsExecRoundTrip(b *testing.B) {
	s := startService(b)
	if !slices.Contains(s.runtimes, "runc") {
		b.Skipf("runtime runc is not usable for %s on this host", profile)
	}
	iters := envInt(b, "GENESIS_BENCH_AGENTS_ITERS", 300)
	const warm = 20
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	sb, err := s.create(ctx, "runc")
	if err != nil {
		b.Fatal(err)
	}
	defer s.remove(context.Background(), sb.ID)

	paths := []struct {
		name string
		run  func(b *testing.B) []time.Duration
	}{
		{"HTTP (Go net/http)", func(b *testing.B) []time.Duration {
			return timeCalls(b, warm, iters, func() error { return httpExecTrue(ctx, s, sb.ID) })
		}},
		{"MCP tools/call exec (Go MCP SDK)", func(b *testing.B) []time.Duration {
			cs := sandboxMCPClient(ctx, b, s)
			defer cs.Close()
			return timeCalls(b, warm, iters, func() error { return mcpExecTrue(ctx, cs, sb.ID) })
		}},
		{"Python SDK (Genesis.exec)", func(b *testing.B) []time.Duration { return pythonExecTrue(ctx, b, s, sb.ID, warm, iters) }},
	}
	tbl := NewTable("path", "n", "p50 ms", "p90 ms", "p99 ms", "mean ms")
	for _, p := range paths {
		ds := p.run(b)
		sum := Summarize(ds)
		sorted := slices.Sorted(slices.Values(ds))
		tbl.Row(p.name, strconv.Itoa(sum.N), FormatMs(sum.P50), FormatMs(Percentile(sorted, 90)), FormatMs(sum.P99), FormatMs(sum.Mean))
	}
	b.ReportMetric(0, "ns/op")
	printTable("exec round trip of `true` in one held runc sandbox, by path", tbl)
}

// timeCalls makes warm untimed calls, then n timed ones.
func timeCalls(b *testing.B, warm, n int, call func() error) []time.Duration {
	b.Helper()
	for range warm {
		if err := call(); err != nil {
			b.Fatal(err)
		}
	}
	ds := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if err := call(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	return ds
}

// httpExecTrue runs `true` by POST /v1/sandboxes/{id}/exec.
func httpExecTrue(ctx context.Context, s *service, id string) error {
	req, _ := http.NewRequestWithContext(ctx, "POST", s.url+"/v1/sandboxes/"+id+"/exec", bytes.NewReader([]byte(`{"command":["true"]}`)))
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		ExitCode *int `json:"exit_code"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || out.ExitCode == nil || *out.ExitCode != 0 {
		return fmt.Errorf("exec true over HTTP: %d %+v %v", resp.StatusCode, out, err)
	}
	return nil
}

// sandboxMCPClient connects the Go MCP SDK's client to the service's own
// MCP server with the tenant's key.
func sandboxMCPClient(ctx context.Context, b *testing.B, s *service) *sdk.ClientSession {
	b.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: s.url + "/v1/mcp/sandbox",
		HTTPClient: &http.Client{Transport: bearerRT{s.key, s.http.Transport}}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return cs
}

// mcpExecTrue runs `true` by the exec tool.
func mcpExecTrue(ctx context.Context, cs *sdk.ClientSession, id string) error {
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{"sandbox_id": id, "command": []string{"true"}}})
	if err != nil {
		return err
	}
	var out struct {
		ExitCode int `json:"exit_code"`
	}
	bs, _ := json.Marshal(res.StructuredContent)
	if res.IsError || json.Unmarshal(bs, &out) != nil || out.ExitCode != 0 {
		return fmt.Errorf("exec true over MCP: %s", bs)
	}
	return nil
}

// pythonExecTrue runs agents_exec.py with the repository's Python SDK
// (GENESIS_BENCH_PYTHON, default /usr/bin/python3, which needs httpx) and
// returns the timed round trips it measured.
func pythonExecTrue(ctx context.Context, b *testing.B, s *service, id string, warm, n int) []time.Duration {
	b.Helper()
	py := os.Getenv("GENESIS_BENCH_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, py, "agents_exec.py", id, strconv.Itoa(n), strconv.Itoa(warm))
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "sdk", "python", "src"), "PYTHONDONTWRITEBYTECODE=1",
		"GENESIS_URL="+s.url, "GENESIS_API_KEY="+s.key)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("%s agents_exec.py (python3 with httpx: apt-get install python3-httpx): %v\n%s", py, err, stderr.String())
	}
	var res struct{ US []int64 }
	if err := json.Unmarshal(out, &res); err != nil || len(res.US) != n {
		b.Fatalf("agents_exec.py output %.200q: %v", out, err)
	}
	ds := make([]time.Duration, len(res.US))
	for i, us := range res.US {
		ds[i] = time.Duration(us) * time.Microsecond
	}
	return ds
}
