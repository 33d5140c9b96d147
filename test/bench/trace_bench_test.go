package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// BenchmarkTrace measures the per-action cost of the operation trace on
// browser actions: three services — trace.record off, recording without
// screenshots (trace.screenshots: off), and recording with a screenshot
// and thumbnail after each action that changes the page (the default) —
// each with a browser sandbox per runtime, run the same actions
// alternately — a click (two trace events) and a fill into a password
// field (two events plus the page query that decides redaction) — and the
// table compares their latencies with the untraced one (target: at most
// 10% added without screenshots; the screenshot's capture is part of the
// action's answer, its keeping is not).
func BenchmarkTrace(b *testing.B) {
	cfg := "profiles:\n" + `  - name: tool-basic
    recipe: tool-basic
    allowed_runtimes: [runc, runsc]
    default_risk_level: low
    resources: {cpu: 1, memory_mb: 512, pids: 256}
    network: none
    user: "1000:1000"
` + browserProfile("browser-cold", 0)
	var services [3]*service
	for i, extra := range []string{"trace:\n  record: false\n", "trace:\n  screenshots: off\n", ""} {
		services[i] = startServiceWith(b, cfg+extra)
	}
	names := []string{"off", "on, no screenshots", "on, screenshot after"}
	acts := envInt(b, "GENESIS_BENCH_TRACE_ACTIONS", 60)
	pause := time.Duration(envInt(b, "GENESIS_BENCH_TRACE_PAUSE_MS", 200)) * time.Millisecond
	tbl := NewTable("runtime", "action", "trace", "n", "p50 ms", "p99 ms", "mean ms", "added at p50")
	services[0].eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		var ids [3]string
		for i, s := range services {
			sb, err := s.client.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "browser-cold", Runtime: rt}, "")
			if err != nil {
				b.Fatal(err)
			}
			defer s.client.DeleteSandbox(context.Background(), sb.ID)
			if err := s.cdpAnswer(ctx, sb.ID); err != nil {
				b.Fatal(err)
			}
			ids[i] = sb.ID
		}
		run := func(i int, a client.BrowserAction) time.Duration {
			t0 := time.Now()
			res, err := services[i].client.BrowserActions(ctx, ids[i], a)
			d := time.Since(t0)
			if err != nil || !res.OK {
				b.Fatalf("%s: %+v %v", a.Type, res, err)
			}
			return d
		}
		page := client.BrowserAction{Type: "evaluate", Expression: `document.body.innerHTML = '<button id="b" onclick="this.textContent = +this.textContent + 1">0</button><input id="pw" type="password">'; true`}
		for i := range services {
			run(i, page)
		}
		// Back to back, an action waits for the last one's screenshot
		// (taken after its answer); with an agent's think time between
		// actions (GENESIS_BENCH_TRACE_PAUSE_MS, default 200) it does not.
		var click, fill, paused [3][]time.Duration
		for range acts {
			for i := range services {
				click[i] = append(click[i], run(i, client.BrowserAction{Type: "click", Selector: "#b"}))
				fill[i] = append(fill[i], run(i, client.BrowserAction{Type: "fill", Selector: "#pw", Text: "s3cret"}))
			}
		}
		for range acts / 2 {
			time.Sleep(pause)
			for i := range services {
				paused[i] = append(paused[i], run(i, client.BrowserAction{Type: "fill", Selector: "#pw", Text: "s3cret"}))
			}
		}
		// The recording sides' traces hold every action; the screenshot
		// side's a screenshot after each.
		for i := 1; i < 3; i++ {
			pg, err := services[i].client.TracePage(ctx, ids[i], 0, 1000)
			shots := 0
			for _, ev := range pg.Events {
				if ev.Kind == "browser.screenshot" {
					shots++
				}
			}
			if err != nil || len(pg.Events) < 4*acts || (i == 2) != (shots > 0) {
				b.Fatalf("service %q's trace has %d events and %d screenshots: %v", names[i], len(pg.Events), shots, err)
			}
		}
		compareTraced(b, tbl, rt, names, "click", click)
		compareTraced(b, tbl, rt, names, "fill (password, redacted)", fill)
		compareTraced(b, tbl, rt, names, fmt.Sprintf("fill after %v", pause), paused)
		b.ReportMetric(0, "ns/op")
	})
	printTable("operation trace: per-action cost of browser actions (ms, "+loadAvg()+")", tbl)
}

// BenchmarkTraceDesktop measures the per-action cost of tracing a desktop's
// computer actions: three services with a desktop sandbox each per runtime
// — trace.record off, recording without screenshots
// (trace.screenshots: off), and recording with a screenshot and thumbnail
// kept after each input action (the default) — run the same clicks and
// one-key types alternately (GENESIS_BENCH_TRACE_ACTIONS, default 60), and
// the table compares their latencies with the untraced one (target: at
// most 10% added without video). A request's last screenshot is captured
// after its answer, holding the display so that the next request waits
// for it: back to back the next action pays for it, after an agent's think
// time it costs nothing; the table shows both.
func BenchmarkTraceDesktop(b *testing.B) {
	var services [3]*service
	for i, extra := range []string{"trace:\n  record: false\n", "trace:\n  screenshots: off\n", ""} {
		services[i] = startServiceWith(b, desktopConfig+extra)
	}
	names := []string{"off", "on, no screenshots", "on, screenshot after"}
	acts := envInt(b, "GENESIS_BENCH_TRACE_ACTIONS", 60)
	pause := time.Duration(envInt(b, "GENESIS_BENCH_TRACE_PAUSE_MS", 200)) * time.Millisecond
	tbl := NewTable("runtime", "action", "trace", "n", "p50 ms", "p99 ms", "mean ms", "added at p50")
	services[0].eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		var ids [3]string
		for i, s := range services {
			sb, err := s.client.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "desktop", Runtime: rt}, "")
			if err != nil {
				b.Fatal(err)
			}
			defer s.client.DeleteSandbox(context.Background(), sb.ID)
			ids[i] = sb.ID
		}
		run := func(i int, a client.ComputerAction) time.Duration {
			t0 := time.Now()
			res, err := services[i].client.ComputerActions(ctx, ids[i], client.ComputerActionsRequest{Actions: []client.ComputerAction{a}})
			d := time.Since(t0)
			if err != nil || !res.OK {
				b.Fatalf("%s: %+v %v", a.Action, res, err)
			}
			return d
		}
		for i := range services {
			run(i, client.ComputerAction{Action: "screenshot"})
		}
		// Back to back, the next action waits for the last one's capture;
		// with an agent's think time between actions (a model's turn takes
		// seconds; GENESIS_BENCH_TRACE_PAUSE_MS, default 200) it does not.
		var click, typ, paused [3][]time.Duration
		for n := range acts {
			for i := range services {
				click[i] = append(click[i], run(i, client.ComputerAction{Action: "left_click", Coordinate: []int{10 + n%100, 700}}))
				typ[i] = append(typ[i], run(i, client.ComputerAction{Action: "key", Text: "shift"}))
			}
		}
		for n := range acts / 2 {
			time.Sleep(pause)
			for i := range services {
				paused[i] = append(paused[i], run(i, client.ComputerAction{Action: "left_click", Coordinate: []int{10 + n%100, 700}}))
			}
		}
		// The screenshot side's trace names a screenshot per action.
		pg, err := services[2].client.TracePage(ctx, ids[2], 0, 1000)
		shots := 0
		for _, ev := range pg.Events {
			if ev.Kind == "computer.screenshot" {
				shots++
			}
		}
		if err != nil || shots < acts {
			b.Fatalf("the screenshot side's trace names %d screenshots, want at least %d: %v", shots, acts, err)
		}
		compareTraced(b, tbl, rt, names, "left click", click)
		compareTraced(b, tbl, rt, names, "key", typ)
		compareTraced(b, tbl, rt, names, fmt.Sprintf("left click after %v", pause), paused)
		b.ReportMetric(0, "ns/op")
	})
	printTable("operation trace: per-action cost of computer actions (ms, "+loadAvg()+")", tbl)
}

// compareTraced adds the rows of one action to tbl: its latencies d on the
// untraced service (names[0]) and on each traced one, with what each adds
// at p50, reported as metrics too.
func compareTraced(b *testing.B, tbl *Table, rt string, names []string, action string, d [3][]time.Duration) {
	base := Summarize(d[0])
	tbl.Row(rt, action, names[0], strconv.Itoa(base.N), FormatMs(base.P50), FormatMs(base.P99), FormatMs(base.Mean), "")
	for i := 1; i < len(d); i++ {
		s := Summarize(d[i])
		added := 100 * (Ms(s.P50) - Ms(base.P50)) / Ms(base.P50)
		tbl.Row(rt, action, names[i], strconv.Itoa(s.N), FormatMs(s.P50), FormatMs(s.P99), FormatMs(s.Mean), fmt.Sprintf("%+.1f%%", added))
		b.ReportMetric(added, fmt.Sprintf("%s-%s-%d-added-%%", rt, strings.ReplaceAll(action, " ", "-"), i))
	}
}

// BenchmarkTraceVideo measures what recording a desktop's display costs,
// per runtime: the sandbox's CPU (ffmpeg runs inside it) and the service's
// (it keeps each segment) over a window (GENESIS_BENCH_VIDEO_SECONDS,
// default 10) while an xterm prints continuously, recording at 5 fps
// against the same window not recording, and the bytes per second the
// segments take.
func BenchmarkTraceVideo(b *testing.B) {
	s := startServiceWith(b, desktopConfig)
	secs := envInt(b, "GENESIS_BENCH_VIDEO_SECONDS", 10)
	window := time.Duration(secs) * time.Second
	tbl := NewTable("runtime", "recording", "service CPU %", "sandbox CPU %", "segments", "KiB/s")
	s.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*opTimeout)
		defer cancel()
		// 50 lines a second: the screen changes all the time, and the
		// sandbox has CPU to spare, so what recording adds shows.
		sb, measure := busyDesktop(ctx, b, s, rt, "while :; do date +%T.%N; sleep 0.02; done")
		pct := func(d, wall time.Duration) string { return fmt.Sprintf("%.1f", 100*d.Seconds()/wall.Seconds()) }
		time.Sleep(2 * time.Second) // the xterm starts printing
		s0, c0 := measure()
		t0 := time.Now()
		time.Sleep(window)
		s1, c1 := measure()
		wall := time.Since(t0)
		tbl.Row(rt, "off", pct(s1-s0, wall), pct(c1-c0, wall), "-", "-")
		baseBox := c1 - c0

		if _, err := s.client.StartRecording(ctx, sb.ID, client.RecordingRequest{FPS: 5, SegmentSeconds: 2}); err != nil {
			b.Fatal(err)
		}
		time.Sleep(2 * time.Second) // ffmpeg starts
		s0, c0 = measure()
		before, err := s.client.GetRecording(ctx, sb.ID)
		if err != nil {
			b.Fatal(err)
		}
		t0 = time.Now()
		time.Sleep(window)
		s1, c1 = measure()
		wall = time.Since(t0)
		after, err := s.client.GetRecording(ctx, sb.ID)
		if err != nil || after.State != "recording" {
			b.Fatalf("recording: %+v %v", after, err)
		}
		if _, err := s.client.StopRecording(ctx, sb.ID); err != nil {
			b.Fatal(err)
		}
		segs := after.Segments - before.Segments
		kibps := float64(after.Bytes-before.Bytes) / 1024 / wall.Seconds()
		tbl.Row(rt, "5 fps", pct(s1-s0, wall), pct(c1-c0, wall), strconv.Itoa(segs), fmt.Sprintf("%.0f", kibps))
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(100*((c1-c0)-baseBox).Seconds()/wall.Seconds(), "recording-sandbox-cpu-%")
		b.ReportMetric(100*(s1-s0).Seconds()/wall.Seconds(), "service-cpu-%")
	})
	printTable("operation trace: recording the display at 5 fps, xterm printing 50 lines/s ("+loadAvg()+")", tbl)
}
