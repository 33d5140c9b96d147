package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

var desktopConfig = "profiles:\n" + `  - name: tool-basic
    recipe: tool-basic
    allowed_runtimes: [runc, runsc]
    default_risk_level: low
    resources: {cpu: 1, memory_mb: 512, pids: 256}
    network: none
    user: "1000:1000"
  - name: desktop
    recipe: desktop-vnc
    allowed_runtimes: [runsc, runc]
    default_risk_level: low
    resources: {cpu: 2, memory_mb: 2048, pids: 512}
    network: none
    user: "1000:1000"
    ports: {allow: ["1024-5899", "5964-5999", "6064-65535"]}
    services:
      - {name: display, command: [/opt/genesis/desktop/display.sh], ready_port: 6001}
      - {name: wm, command: [/opt/genesis/desktop/wm.sh], env: {DISPLAY: ":1"}}
    desktop: {display: 1, width: 1280, height: 800, action_timeout: 10s, max_actions: 100}
`

// BenchmarkDesktop measures, per runtime, the desktop-vnc profile:
//
//   - ready: POST /v1/sandboxes until the first screenshot through the
//     computer actions API (the service waits for the X server)
//     (GENESIS_BENCH_DESKTOP_COLD, default 5);
//   - on one sandbox, each a request of one action
//     (GENESIS_BENCH_DESKTOP_ACTIONS, default 50): a 1280×800 PNG
//     screenshot, a left click (XTEST, synced with the X server), typing
//     one character, and a takeover (a human's POST …/control) followed
//     by the agent's refused action, then the release;
//   - the idle memory of one desktop sandbox (docker stats).
//
// GENESIS_BENCH_DESKTOP_PARTS (e.g. "actions") runs only the parts it
// lists, of ready and actions. With GENESIS_BENCH_BASELINE_BIN a second
// service runs that build with a desktop sandbox of its own, and the
// actions alternate between the two builds round by round (each first
// every other time), so that both see the same machine.
func BenchmarkDesktop(b *testing.B) {
	selected := benchParts("GENESIS_BENCH_DESKTOP_PARTS")
	s := startServiceWith(b, desktopConfig)
	var base *service
	if dir := baselineDir(b); dir != "" && selected("actions") {
		base = startServiceIn(b, dir, desktopConfig)
	}
	cold := envInt(b, "GENESIS_BENCH_DESKTOP_COLD", 5)
	acts := envInt(b, "GENESIS_BENCH_DESKTOP_ACTIONS", 50)
	tbl := NewTable("runtime", "measure", "n", "p50 ms", "p99 ms", "mean ms", "min ms", "max ms")
	row := func(rt, what string, d []time.Duration) Summary {
		sum := Summarize(d)
		tbl.Row(rt, what, strconv.Itoa(sum.N), FormatMs(sum.P50), FormatMs(sum.P99), FormatMs(sum.Mean), FormatMs(sum.Min), FormatMs(sum.Max))
		return sum
	}
	mem := NewTable("runtime", "idle desktop sandbox memory")
	one := func(ctx context.Context, s *service, id string, a client.ComputerAction) error {
		res, err := s.client.ComputerActions(ctx, id, client.ComputerActionsRequest{Actions: []client.ComputerAction{a}})
		if err == nil && !res.OK {
			err = fmt.Errorf("%s: %s", a.Action, res.Results[0].Error)
		}
		return err
	}
	s.eachRuntime(b, func(b *testing.B, rt string) {
		part := func(b *testing.B, name string, fn func(b *testing.B)) {
			if selected(name) {
				b.Run(name, fn)
			}
		}
		part(b, "ready", func(b *testing.B) {
			var total, create []time.Duration
			for range cold {
				ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				t0 := time.Now()
				sb, err := s.client.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "desktop", Runtime: rt}, "")
				t1 := time.Now()
				if err != nil {
					cancel()
					b.Fatalf("create (%s): %v", rt, err)
				}
				err = one(ctx, s, sb.ID, client.ComputerAction{Action: "screenshot"})
				t2 := time.Now()
				derr := s.client.DeleteSandbox(ctx, sb.ID)
				cancel()
				if err != nil || derr != nil {
					b.Fatalf("first screenshot of %s: %v; delete: %v", sb.ID, err, derr)
				}
				total = append(total, t2.Sub(t0))
				create = append(create, t1.Sub(t0))
			}
			sum := row(rt, "create → first screenshot", total)
			row(rt, "  of which create", create)
			reportSummary(b, "", sum)
		})
		part(b, "actions", func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*opTimeout)
			defer cancel()
			type build struct {
				name                       string
				s                          *service
				id                         string
				shot, click, key, takeover []time.Duration
			}
			builds := []*build{{name: "", s: s}}
			if base != nil {
				if !slices.Contains(base.runtimes, rt) {
					b.Skipf("runtime %s is not usable for the desktop by the baseline", rt)
				}
				builds = append(builds, &build{name: baselineLabel() + ": ", s: base})
			}
			for _, bd := range builds {
				sb, err := bd.s.client.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "desktop", Runtime: rt}, "")
				if err != nil {
					b.Fatal(err)
				}
				defer bd.s.client.DeleteSandbox(context.Background(), sb.ID)
				bd.id = sb.ID
				if err := one(ctx, bd.s, sb.ID, client.ComputerAction{Action: "screenshot"}); err != nil {
					b.Fatal(err)
				}
			}
			for i := range acts {
				for k := range builds {
					bd := builds[(i+k)%len(builds)]
					t0 := time.Now()
					if err := one(ctx, bd.s, bd.id, client.ComputerAction{Action: "screenshot"}); err != nil {
						b.Fatal(err)
					}
					bd.shot = append(bd.shot, time.Since(t0))
					t0 = time.Now()
					if err := one(ctx, bd.s, bd.id, client.ComputerAction{Action: "left_click", Coordinate: []int{10 + i%100, 700}}); err != nil {
						b.Fatal(err)
					}
					bd.click = append(bd.click, time.Since(t0))
					t0 = time.Now()
					if err := one(ctx, bd.s, bd.id, client.ComputerAction{Action: "key", Text: "shift"}); err != nil {
						b.Fatal(err)
					}
					bd.key = append(bd.key, time.Since(t0))
					// Takeover: the human's POST, then the agent's next action
					// answered 409 — the time until the agent knows.
					t0 = time.Now()
					if _, err := bd.s.client.TakeDesktopControl(ctx, bd.id, client.TakeDesktopControlRequest{Holder: "human:bench"}); err != nil {
						b.Fatal(err)
					}
					if err := one(ctx, bd.s, bd.id, client.ComputerAction{Action: "mouse_move", Coordinate: []int{5, 5}}); err == nil {
						b.Fatal("the agent acted while a human held control")
					}
					bd.takeover = append(bd.takeover, time.Since(t0))
					if _, err := bd.s.client.ReleaseDesktopControl(ctx, bd.id); err != nil {
						b.Fatal(err)
					}
				}
			}
			var ss, cs, bss, bcs Summary
			for i, bd := range builds {
				s1 := row(rt, bd.name+"screenshot 1280×800 png (inline)", bd.shot)
				c1 := row(rt, bd.name+"left click", bd.click)
				row(rt, bd.name+"key (one chord)", bd.key)
				ts := row(rt, bd.name+"takeover → agent's action refused", bd.takeover)
				if i == 0 {
					ss, cs = s1, c1
					b.ReportMetric(Ms(ts.P50), "takeover-p50-ms")
				} else {
					bss, bcs = s1, c1
				}
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(Ms(ss.P50), "screenshot-p50-ms")
			b.ReportMetric(Ms(cs.P50), "click-p50-ms")
			for _, f := range []struct {
				figure     string
				this, base Summary
			}{{"desktop left click", cs, bcs}, {"desktop screenshot 1280×800", ss, bss}} {
				tr := MsRow(7, f.figure, rt, f.this)
				judgeNoRegression(&tr, f.this, f.base, baselineLabel())
				recordTarget(tr)
			}
			mib := sandboxMemMiB(ctx, b, builds[0].id)
			b.ReportMetric(mib, "idle-MiB")
			mem.Row(rt, fmt.Sprintf("%.1f MiB", mib))
		})
	})
	printTable("desktop-vnc: readiness and computer actions API, ms", tbl)
	if selected("actions") {
		printTable("desktop-vnc: one idle desktop sandbox after the actions (docker stats)", mem)
	}
}

// BenchmarkDesktopViewer measures one live viewer, per runtime, while the
// screen changes all the time (an xterm printing the time in a loop):
// frames per second and bytes per second the viewer receives through the
// service (a Go RFB client asking for the next incremental update as soon
// as one arrives, raw encoding: the most bytes, the least client CPU), and
// the CPU of the service and of the sandbox during the window, against the
// same window with no viewer (GENESIS_BENCH_VIEWER_SECONDS, default 10).
func BenchmarkDesktopViewer(b *testing.B) {
	s := startServiceWith(b, desktopConfig)
	secs := envInt(b, "GENESIS_BENCH_VIEWER_SECONDS", 10)
	window := time.Duration(secs) * time.Second
	tbl := NewTable("runtime", "viewer", "frames/s", "MiB/s", "service CPU %", "sandbox CPU %")
	s.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*opTimeout)
		defer cancel()
		sb, cpu := busyDesktop(ctx, b, s, rt, "while :; do date +%T.%N; done")
		pct := func(d time.Duration, wall time.Duration) string {
			return fmt.Sprintf("%.1f", 100*d.Seconds()/wall.Seconds())
		}
		// Let the xterm start and settle, then a window with no viewer.
		time.Sleep(2 * time.Second)
		s0, c0 := cpu()
		t0 := time.Now()
		time.Sleep(window)
		s1, c1 := cpu()
		wall := time.Since(t0)
		tbl.Row(rt, "none", "-", "-", pct(s1-s0, wall), pct(c1-c0, wall))

		conn, err := s.client.DialDisplayVNC(ctx, sb.ID, "observer")
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		v, err := newRFBCounter(conn)
		if err != nil {
			b.Fatal(err)
		}
		if err := v.count(time.Second); err != nil { // the first full frame
			b.Fatal(err)
		}
		s0, c0 = cpu()
		t0 = time.Now()
		if err := v.count(window); err != nil {
			b.Fatal(err)
		}
		s1, c1 = cpu()
		wall = time.Since(t0)
		fps := float64(v.frames) / wall.Seconds()
		mibps := float64(v.bytes) / wall.Seconds() / (1 << 20)
		tbl.Row(rt, "one observer", fmt.Sprintf("%.1f", fps), fmt.Sprintf("%.2f", mibps), pct(s1-s0, wall), pct(c1-c0, wall))
		b.ReportMetric(0, "ns/op")
		b.ReportMetric(fps, "frames/s")
		b.ReportMetric(100*(s1-s0).Seconds()/wall.Seconds(), "service-cpu-%")
		b.ReportMetric(100*(c1-c0).Seconds()/wall.Seconds(), "sandbox-cpu-%")
	})
	printTable("desktop-vnc: one live viewer while an xterm prints continuously ("+loadAvg()+")", tbl)
}

// busyDesktop creates a desktop sandbox under rt (deleted when b ends) with
// an xterm printing the time in loop (a shell loop), and returns it with a reader of the
// CPU time the service and the sandbox have used so far.
func busyDesktop(ctx context.Context, b *testing.B, s *service, rt, loop string) (*client.Sandbox, func() (svc, box time.Duration)) {
	sb, err := s.client.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "desktop", Runtime: rt}, "")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.client.DeleteSandbox(context.Background(), sb.ID) })
	res, err := s.client.ComputerActions(ctx, sb.ID, client.ComputerActionsRequest{Actions: []client.ComputerAction{
		{Action: "launch", Command: []string{"xterm", "-fa", "DejaVu Sans Mono", "-geometry", "100x40+0+0", "-e", "sh", "-c", loop}}}})
	if err != nil || !res.OK {
		b.Fatalf("launch: %+v %v", res, err)
	}
	// The window is on the screen before anything is measured (an xterm
	// without a font it can load exits at once).
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := s.client.ComputerActions(ctx, sb.ID, client.ComputerActionsRequest{Actions: []client.ComputerAction{{Action: "list_windows"}}})
		if err == nil && res.OK && len(res.Results[0].Windows) > 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the busy xterm never showed: %+v %v", res, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cg, err := sandboxCgroup(ctx, sb.ID)
	if err != nil {
		b.Fatal(err)
	}
	return sb, func() (svc, box time.Duration) {
		svc, err := processCPU(s.cmd.Process.Pid)
		if err != nil {
			b.Fatal(err)
		}
		if box, _, err = cg.read(); err != nil {
			b.Fatal(err)
		}
		return svc, box
	}
}
