package bench

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// BenchmarkTrace measures the per-action cost of the operation trace: two
// services, one recording (the default) and one with trace.record off, each
// with a browser sandbox per runtime, run the same actions alternately — a
// click (two trace events) and a fill into a password field (two events
// plus the page query that decides redaction) — and the table compares
// their latencies (target: at most 10% added).
func BenchmarkTrace(b *testing.B) {
	cfg := "profiles:\n" + `  - name: tool-basic
    recipe: tool-basic
    allowed_runtimes: [runc, runsc]
    default_risk_level: low
    resources: {cpu: 1, memory_mb: 512, pids: 256}
    network: none
    user: "1000:1000"
` + browserProfile("browser-cold", 0)
	on := startServiceWith(b, cfg)
	off := startServiceWith(b, cfg+"trace:\n  record: false\n")
	acts := envInt(b, "GENESIS_BENCH_TRACE_ACTIONS", 60)
	tbl := NewTable("runtime", "action", "trace", "n", "p50 ms", "p99 ms", "mean ms", "added at p50")
	on.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		type side struct {
			s  *service
			id string
		}
		var sides [2]side
		for i, s := range []*service{on, off} {
			sb, err := s.client.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "browser-cold", Runtime: rt}, "")
			if err != nil {
				b.Fatal(err)
			}
			defer s.client.DeleteSandbox(context.Background(), sb.ID)
			if err := s.cdpAnswer(ctx, sb.ID); err != nil {
				b.Fatal(err)
			}
			sides[i] = side{s, sb.ID}
		}
		run := func(sd side, a client.BrowserAction) time.Duration {
			t0 := time.Now()
			res, err := sd.s.client.BrowserActions(ctx, sd.id, a)
			d := time.Since(t0)
			if err != nil || !res.OK {
				b.Fatalf("%s: %+v %v", a.Type, res, err)
			}
			return d
		}
		page := client.BrowserAction{Type: "evaluate", Expression: `document.body.innerHTML = '<button id="b" onclick="this.textContent = +this.textContent + 1">0</button><input id="pw" type="password">'; true`}
		for _, sd := range sides {
			run(sd, page)
		}
		var click, fill [2][]time.Duration
		for range acts {
			for i, sd := range sides {
				click[i] = append(click[i], run(sd, client.BrowserAction{Type: "click", Selector: "#b"}))
				fill[i] = append(fill[i], run(sd, client.BrowserAction{Type: "fill", Selector: "#pw", Text: "s3cret"}))
			}
		}
		// The trace of the recording side holds every action, redacted.
		pg, err := on.client.TracePage(ctx, sides[0].id, 0, 1000)
		if err != nil || len(pg.Events) < 4*acts {
			b.Fatalf("the recording service's trace has %d events, want at least %d: %v", len(pg.Events), 4*acts, err)
		}
		for _, m := range []struct {
			name string
			d    [2][]time.Duration
		}{{"click", click}, {"fill (password, redacted)", fill}} {
			son, soff := Summarize(m.d[0]), Summarize(m.d[1])
			added := 100 * (Ms(son.P50) - Ms(soff.P50)) / Ms(soff.P50)
			tbl.Row(rt, m.name, "off", strconv.Itoa(soff.N), FormatMs(soff.P50), FormatMs(soff.P99), FormatMs(soff.Mean), "")
			tbl.Row(rt, m.name, "on", strconv.Itoa(son.N), FormatMs(son.P50), FormatMs(son.P99), FormatMs(son.Mean), fmt.Sprintf("%+.1f%%", added))
			b.ReportMetric(added, rt+"-"+m.name[:4]+"-added-%")
		}
		b.ReportMetric(0, "ns/op")
	})
	printTable("operation trace: per-action cost (browser actions API, ms)", tbl)
}
