package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/testenv"
)

// BenchmarkConsoleFirstView: the web console's sandbox list with
// GENESIS_BENCH_CONSOLE_SANDBOXES sandboxes (default 100, runc), loaded in
// this machine's Chromium by Playwright's client (test/browserclient,
// console.mjs perf) GENESIS_BENCH_CONSOLE_RELOADS times (default 30): the
// time from navigation start until the list is rendered (interactive: the
// view's controls are wired by then), and DOMContentLoaded.
func BenchmarkConsoleFirstView(b *testing.B) {
	dir := filepath.Join(testenv.ModuleRoot(b), "test", "browserclient")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); err != nil {
		b.Fatalf("Playwright's client is not installed (make test-deps): %v", err)
	}
	n := envInt(b, "GENESIS_BENCH_CONSOLE_SANDBOXES", 100)
	reloads := envInt(b, "GENESIS_BENCH_CONSOLE_RELOADS", 30)
	s := startService(b)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 6)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			sb, err := s.client.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: profile, Runtime: "runc", WaitSeconds: 60,
				Resources: &client.Resources{CPU: 0.1, MemoryMB: 64}, Metadata: map[string]string{"purpose": "bench", "n": strconv.Itoa(i)}}, "")
			if err != nil {
				errs <- err
				return
			}
			s.mu.Lock()
			s.live[sb.ID] = true
			s.mu.Unlock()
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("creating the sandboxes: %v", err)
	}
	shots := b.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "console.mjs", "perf", s.url, s.key, "", "", shots, profile, "runc")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CONSOLE_RELOADS="+strconv.Itoa(reloads))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, _ := cmd.Output()
	var r struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
		Perf  []struct {
			Listed int     `json:"listed"`
			MS     float64 `json:"ms"`
			DCL    float64 `json:"dcl"`
		} `json:"perf"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil || !r.OK {
		b.Fatalf("console.mjs perf: %v %s: stdout %q stderr %q", err, r.Error, out, stderr.String())
	}
	var listed, dcl []time.Duration
	for _, p := range r.Perf {
		if p.Listed != n {
			b.Fatalf("the console listed %d sandboxes, want %d", p.Listed, n)
		}
		listed = append(listed, time.Duration(p.MS*float64(time.Millisecond)))
		dcl = append(dcl, time.Duration(p.DCL*float64(time.Millisecond)))
	}
	ls, ds := Summarize(listed), Summarize(dcl)
	reportSummary(b, "listed-", ls)
	b.ReportMetric(Ms(ds.P50), "dcl-p50-ms")
	t := NewTable("measure", "n", "p50 ms", "p99 ms", "mean ms", "min ms", "max ms")
	for _, row := range []struct {
		name string
		s    Summary
	}{{fmt.Sprintf("listed (%d sandboxes)", n), ls}, {"DOMContentLoaded", ds}} {
		t.Row(row.name, strconv.Itoa(len(listed)), FormatMs(row.s.P50), FormatMs(row.s.P99), FormatMs(row.s.Mean), FormatMs(row.s.Min), FormatMs(row.s.Max))
	}
	printTable("console first view (navigation start to the sandbox list rendered, Chromium headless)", t)
}
