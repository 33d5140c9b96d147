package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// browserProfile is a browser-playwright profile named name of the
// benchmark service, allowed under runc too (the default profile runs
// high-risk pages under runsc only), with pools of pool idle members per
// runtime when pool > 0.
func browserProfile(name string, pool int, chromiumArgs ...string) string {
	command := "/opt/genesis/browser/chromium.sh"
	for _, a := range chromiumArgs {
		command += ", " + a
	}
	y := fmt.Sprintf(`  - name: %s
    recipe: browser-playwright
    allowed_runtimes: [runsc, runc]
    default_risk_level: low
    resources: {cpu: 2, memory_mb: 2048, pids: 1024}
    network: none
    user: "1000:1000"
    services:
      - {name: chromium, command: [%s], ready_port: 9222, ready_path: /json/version}
      - {name: playwright, command: [node, /opt/genesis/browser/playwright-server.mjs], ready_port: 9223}
    browser: {cdp_port: 9222, playwright_port: 9223, downloads_dir: /workspace/downloads, profile_dir: /home/sandbox/.genesis-browser, action_timeout: 10s, max_action_timeout: 60s, max_actions: 100}
`, name, command)
	if pool > 0 {
		y += fmt.Sprintf("    pools: [{runtime: runc, min_idle: %[1]d, max_total: %[1]d}, {runtime: runsc, min_idle: %[1]d, max_total: %[1]d}]\n", pool)
	}
	return y
}

// browserConfig is BenchmarkBrowser's service; the browser-warm profile
// has a pool of one per runtime when warm (the warm part runs).
func browserConfig(warm bool) string {
	return "warm_pools: true\nprofiles:\n" + `  - name: tool-basic
    recipe: tool-basic
    allowed_runtimes: [runc, runsc]
    default_risk_level: low
    resources: {cpu: 1, memory_mb: 512, pids: 256}
    network: none
    user: "1000:1000"
` + browserProfile("browser-cold", 0) + browserProfile("browser-warm", btoi(warm)) + chromiumVariantProfiles()
}

// benchParts is the set of parts a benchmark runs: those listed
// (comma-separated) in the environment variable env, or every one when it
// is unset.
func benchParts(env string) func(part string) bool {
	v, ok := os.LookupEnv(env)
	return func(part string) bool {
		return !ok || slices.Contains(strings.Split(v, ","), part)
	}
}

// chromiumVariants are Chromium command lines BenchmarkBrowser measures
// beside the image's own (chromium.sh's flags plus these), each in a
// profile of its own: the ones that might make Chromium's rendering and
// capture cheaper under gVisor (fewer processes, the GPU process's work in
// the browser's, no software GL).
var chromiumVariants = []struct{ name, args string }{
	{"single-process", "--single-process"},
	{"in-process-gpu", "--in-process-gpu"},
	{"no-zygote-in-process-gpu", "--no-zygote --in-process-gpu"},
	{"disable-gpu-compositing", "--disable-gpu-compositing"},
	{"disable-software-rasterizer", "--disable-software-rasterizer"},
}

func chromiumVariantProfiles() string {
	var y string
	for _, v := range chromiumVariants {
		y += browserProfile("browser-"+v.name, 0, strings.Fields(v.args)...)
	}
	return y
}

// cdpAnswer asks the sandbox's browser for /json/version through the
// service; the service waits for a starting browser, so the answer comes
// when Chromium answers.
func (s *service) cdpAnswer(ctx context.Context, id string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url+client.BrowserPath(id)+"/json/version", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	resp, err := s.http.Do(req)
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "webSocketDebuggerUrl") {
		return fmt.Errorf("/json/version of %s: %d %s", id, resp.StatusCode, body)
	}
	return nil
}

// BenchmarkBrowser measures, per runtime, the browser-playwright profile:
//
//   - cold: POST /v1/sandboxes until Chromium's first CDP answer through
//     the service (GENESIS_BENCH_BROWSER_COLD, default 5);
//   - warm: POST /v1/leases from a warm pool of one until the first CDP
//     answer (GENESIS_BENCH_BROWSER_WARM, default 5), each iteration on a
//     settled pool, then the first action (an evaluate) of the lease;
//   - actions on one sandbox, each a request of one action
//     (GENESIS_BENCH_BROWSER_ACTIONS, default 50): evaluate of a constant
//     (the round-trip floor: service → agent → Chromium and back),
//     click, and a viewport PNG screenshot kept as an artifact (fast PNG
//     encoding, the default), beside the same encoded for size (compress)
//     and PNG and JPEG q80 answered inline (keep false), interleaved so
//     that all see the same load, each click followed (unmeasured) by
//     the wait until the trace has kept its screenshot; then clicks back
//     to back, each waiting for the trace's screenshot after the one
//     before;
//   - beside each, the same CDP calls made by a direct client inside the
//     sandbox (cdpdirect: Chromium's page WebSocket on the sandbox's
//     loopback, no service or agent in the path), in rounds alternating
//     with the service's, and the difference of the two;
//   - Chromium's command-line variants (chromiumVariants), each in a
//     sandbox of its own, by the direct client only, alternating with
//     the image's own (GENESIS_BENCH_BROWSER_FLAGS, default 30), with the
//     sandbox's process count;
//   - the idle memory of one browser sandbox (its container's cgroup, as
//     docker stats reports it), measured after the actions.
//
// GENESIS_BENCH_BROWSER_PARTS (e.g. "actions") runs only the parts it
// lists, of cold, warm, actions and chromium-flags.
func BenchmarkBrowser(b *testing.B) {
	selected := benchParts("GENESIS_BENCH_BROWSER_PARTS")
	s := startServiceWith(b, browserConfig(selected("warm")))
	cold := envInt(b, "GENESIS_BENCH_BROWSER_COLD", 5)
	warm := envInt(b, "GENESIS_BENCH_BROWSER_WARM", 5)
	acts := envInt(b, "GENESIS_BENCH_BROWSER_ACTIONS", 50)
	tbl := NewTable("runtime", "measure", "n", "p50 ms", "p90 ms", "p99 ms", "mean ms", "min ms", "max ms")
	row := func(rt, what string, d []time.Duration) Summary {
		sum := Summarize(d)
		tbl.Row(rt, what, strconv.Itoa(sum.N), FormatMs(sum.P50), FormatMs(sum.P90), FormatMs(sum.P99), FormatMs(sum.Mean), FormatMs(sum.Min), FormatMs(sum.Max))
		return sum
	}
	mem := NewTable("runtime", "idle browser sandbox memory")
	flagIters := envInt(b, "GENESIS_BENCH_BROWSER_FLAGS", 30)
	flags := NewTable("runtime", "chromium", "processes", "op", "n", "p50 ms", "p90 ms", "p99 ms")
	s.eachRuntime(b, func(b *testing.B, rt string) {
		part := func(b *testing.B, name string, fn func(b *testing.B)) {
			if selected(name) {
				b.Run(name, fn)
			}
		}
		part(b, "cold", func(b *testing.B) {
			var total, create []time.Duration
			for range cold {
				ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				t0 := time.Now()
				sb, err := s.client.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "browser-cold", Runtime: rt}, "")
				t1 := time.Now()
				if err != nil {
					cancel()
					b.Fatalf("create (%s): %v", rt, err)
				}
				err = s.cdpAnswer(ctx, sb.ID)
				t2 := time.Now()
				derr := s.client.DeleteSandbox(ctx, sb.ID)
				cancel()
				if err != nil || derr != nil {
					b.Fatalf("first CDP answer of %s: %v; delete: %v", sb.ID, err, derr)
				}
				total = append(total, t2.Sub(t0))
				create = append(create, t1.Sub(t0))
			}
			sum := row(rt, "create → first CDP answer", total)
			row(rt, "  of which create", create)
			reportSummary(b, "", sum)
		})
		part(b, "warm", func(b *testing.B) {
			pool := "browser-warm-" + rt
			var total, lease, action []time.Duration
			ttl := int64(300)
			for range warm {
				s.waitSettled(b, pool)
				ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				t0 := time.Now()
				l, err := s.client.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: "browser-warm", Runtime: rt, TTLSeconds: &ttl})
				if err != nil {
					cancel()
					b.Fatalf("lease (%s): %v", rt, err)
				}
				lease = append(lease, time.Since(t0))
				err = s.cdpAnswer(ctx, l.SandboxID)
				t1 := time.Now()
				if err == nil {
					var res *client.BrowserActionsResult
					res, err = s.client.BrowserActions(ctx, l.SandboxID, client.BrowserAction{Type: "evaluate", Expression: "1+1"})
					if err == nil && !res.OK {
						err = fmt.Errorf("first action: %+v", res)
					}
					action = append(action, time.Since(t1))
				}
				rerr := s.client.ReleaseLease(ctx, l.LeaseID)
				cancel()
				switch {
				case err != nil:
					b.Fatal(err)
				case rerr != nil:
					b.Fatalf("release: %v", rerr)
				case !l.Warm:
					b.Fatalf("lease %s under %s was not warm", l.LeaseID, rt)
				}
				total = append(total, t1.Sub(t0))
			}
			reportSummary(b, "", row(rt, "warm lease → first CDP answer", total))
			row(rt, "  of which the lease", lease)
			row(rt, "then the first action (evaluate)", action)
		})
		part(b, "actions", func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			sb, err := s.client.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "browser-cold", Runtime: rt}, "")
			if err != nil {
				b.Fatal(err)
			}
			defer s.client.DeleteSandbox(context.Background(), sb.ID)
			if err := s.cdpAnswer(ctx, sb.ID); err != nil {
				b.Fatal(err)
			}
			run := func(a client.BrowserAction) time.Duration {
				t0 := time.Now()
				res, err := s.client.BrowserActions(ctx, sb.ID, a)
				d := time.Since(t0)
				if err != nil || !res.OK {
					b.Fatalf("%s: %+v %v", a.Type, res, err)
				}
				return d
			}
			// A page of the viewport's size with a button that counts.
			run(client.BrowserAction{Type: "evaluate", Expression: `document.body.innerHTML = '<button id="b" style="width:200px;height:80px" onclick="this.textContent = +this.textContent + 1">0</button><div style="height:700px;background:linear-gradient(#39f,#f93)"></div>'; true`})
			direct := s.directCDP(ctx, b, sb.ID)
			no := false
			ours := map[string][]time.Duration{}
			measure := func(name string, a client.BrowserAction) { ours[name] = append(ours[name], run(a)) }
			// Rounds of the direct client and of the service alternate, so
			// that both see the same load; within a round each measure's
			// calls are interleaved.
			rounds := min(5, acts)
			clicks := 0
			// settle waits, unmeasured, until the trace has the screenshot
			// after the click just made (captured and kept in the
			// background), so that the next action measured meets a
			// settled page, as after an agent's think time.
			var cursor int64
			settle := func() { cursor = awaitTraceScreenshot(ctx, b, s.client, sb.ID, cursor) }
			for { // the trace so far
				page, err := s.client.TracePage(ctx, sb.ID, cursor, 0)
				if err != nil {
					b.Fatal(err)
				}
				if len(page.Events) == 0 {
					break
				}
				cursor = page.Next
			}
			for r := range rounds {
				n := acts/rounds + btoi(r < acts%rounds)
				clicks += direct.round(n)
				for range n {
					measure("evaluate", client.BrowserAction{Type: "evaluate", Expression: "1"})
					measure("click", client.BrowserAction{Type: "click", Selector: "#b"})
					clicks++
					settle()
					measure("png", client.BrowserAction{Type: "screenshot"})
					measure("png-compress", client.BrowserAction{Type: "screenshot", Compress: true})
					measure("png-inline", client.BrowserAction{Type: "screenshot", Keep: &no})
					measure("jpeg-inline", client.BrowserAction{Type: "screenshot", Format: "jpeg", Keep: &no})
				}
			}
			// Clicks back to back: each waits until the trace's screenshot
			// after the one before is captured (the default
			// trace.screenshots: after).
			for range acts {
				measure("click-b2b", client.BrowserAction{Type: "click", Selector: "#b"})
				clicks++
			}
			res, err := s.client.BrowserActions(ctx, sb.ID, client.BrowserAction{Type: "text", Selector: "#b"})
			if err != nil || string(res.Results[0].Value) != strconv.Quote(strconv.Itoa(clicks)) {
				b.Fatalf("the button counted %s clicks, want %d (%v)", res.Results[0].Value, clicks, err)
			}
			pair := func(what, ourKey, directKey string) Summary {
				o := row(rt, what, ours[ourKey])
				if directKey == "" {
					return o
				}
				d := row(rt, "  direct CDP in the sandbox", direct.samples[directKey])
				tbl.Row(rt, "  actions API − direct, p50", "", fmt.Sprintf("%+.2f", Ms(o.P50-d.P50)), fmt.Sprintf("%+.2f", Ms(o.P90-d.P90)), "", "", "", "")
				return o
			}
			es := pair("evaluate (round-trip floor)", "evaluate", "evaluate")
			cs := pair("click (selector)", "click", "click")
			row(rt, "… back to back (waits for the trace's screenshot)", ours["click-b2b"])
			ss := pair("screenshot png (fast), kept", "png", "shot:png+fast")
			pair("… png encoded for size (compress), kept", "png-compress", "shot:png")
			pair("… png (fast) in the answer (keep false)", "png-inline", "")
			js := pair("… jpeg q80 in the answer (keep false)", "jpeg-inline", "shot:jpeg-80")
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(Ms(cs.P50), "click-p50-ms")
			b.ReportMetric(Ms(cs.P50-Summarize(direct.samples["click"]).P50), "click-overhead-p50-ms")
			b.ReportMetric(Ms(ss.P50), "screenshot-p50-ms")
			b.ReportMetric(Ms(Summarize(direct.samples["shot:png+fast"]).P50), "direct-screenshot-p50-ms")
			tr := MsRow(6, "browser screenshot (png, kept)", rt, ss)
			tr.Compare = []Compared{{"direct CDP in the sandbox", Ms(Summarize(direct.samples["shot:png+fast"]).P50)}}
			tr.Verdict = NoTarget
			if rt == "runsc" {
				tr.Verdict = VerdictOf(ss.P50 <= 80*time.Millisecond)
			}
			recordTarget(tr)
			b.ReportMetric(Ms(js.P50), "jpeg-p50-ms")
			b.ReportMetric(Ms(es.P50), "evaluate-p50-ms")
			mib := sandboxMemMiB(ctx, b, sb.ID)
			b.ReportMetric(mib, "idle-MiB")
			mem.Row(rt, fmt.Sprintf("%.1f MiB", mib))
		})
		part(b, "chromium-flags", func(b *testing.B) {
			// Each variant in a sandbox of its own, measured by the direct
			// client (Chromium's flags are Chromium's cost, not the
			// service's), alternating with the image's own in rounds.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
			defer cancel()
			type variant struct {
				name    string
				d       *directCDP
				procs   string
				profile string
			}
			vs := []*variant{{name: "as shipped", profile: "browser-cold"}}
			for _, v := range chromiumVariants {
				vs = append(vs, &variant{name: v.name + " (" + v.args + ")", profile: "browser-" + v.name})
			}
			for _, v := range vs {
				sb, err := s.client.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: v.profile, Runtime: rt}, "")
				if err != nil {
					b.Fatal(err)
				}
				defer s.client.DeleteSandbox(context.Background(), sb.ID)
				if err := s.cdpAnswer(ctx, sb.ID); err != nil {
					b.Fatal(err)
				}
				if _, err := s.client.BrowserActions(ctx, sb.ID, client.BrowserAction{Type: "evaluate", Expression: `document.body.innerHTML = '<button id="b" style="width:200px;height:80px" onclick="this.textContent = +this.textContent + 1">0</button><div style="height:700px;background:linear-gradient(#39f,#f93)"></div>'; true`}); err != nil {
					b.Fatal(err)
				}
				v.d = s.directCDP(ctx, b, sb.ID)
				res, err := s.client.Exec(ctx, sb.ID, client.ExecRequest{Command: []string{"sh", "-c", `ls /proc | grep -c '^[0-9]'`}})
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("counting processes: %v %+v", err, res)
				}
				v.procs = strings.TrimSpace(res.Stdout)
			}
			rounds := min(3, flagIters)
			for r := range rounds {
				for _, v := range vs {
					v.d.round(flagIters/rounds + btoi(r < flagIters%rounds))
				}
			}
			for _, v := range vs {
				for _, op := range []string{"evaluate", "click", "shot:png+fast", "shot:jpeg-80"} {
					sum := Summarize(v.d.samples[op])
					flags.Row(rt, v.name, v.procs, op, strconv.Itoa(sum.N), FormatMs(sum.P50), FormatMs(sum.P90), FormatMs(sum.P99))
				}
			}
			b.ReportMetric(0, "ns/op")
		})
	})
	if selected("chromium-flags") {
		printTable("browser-playwright: Chromium's flags, direct CDP in the sandbox, ms", flags)
	}
	printTable("browser-playwright: readiness and actions API, ms", tbl)
	if selected("actions") {
		printTable("browser-playwright: one idle browser sandbox after the actions (docker stats)", mem)
	}
}

// directCDP is the benchmark's direct DevTools client (cdpdirect) in a
// browser sandbox: it talks to Chromium's page WebSocket on the sandbox's
// loopback, without the service or the agent in the path, making the same
// CDP calls the actions API makes.
type directCDP struct {
	b       *testing.B
	s       *service
	ctx     context.Context
	id      string
	warmed  bool
	samples map[string][]time.Duration
	// ops, if set, are the ops measured instead of directOps.
	ops string
}

// directOps are what the direct client measures (cdpdirect -ops).
const directOps = "evaluate,click,shot:png+fast,shot:png,shot:jpeg-80"

// directCDP uploads cdpdirect into sandbox id.
func (s *service) directCDP(ctx context.Context, b *testing.B, id string) *directCDP {
	b.Helper()
	f, err := os.Open(filepath.Join(binDir(b), "cdpdirect"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.client.WriteFile(ctx, id, "/workspace/cdpdirect", f, client.WriteFileOptions{Mode: "0755", Size: fi.Size()}); err != nil {
		b.Fatal(err)
	}
	return &directCDP{b: b, s: s, ctx: ctx, id: id, samples: map[string][]time.Duration{}}
}

// round measures n of each op (after a few unmeasured ones the first
// time) and answers how many clicks it made (of the ops named click…).
func (d *directCDP) round(n int) int {
	warm := 1
	if !d.warmed {
		warm, d.warmed = 5, true
	}
	res, err := d.s.client.Exec(d.ctx, d.id, client.ExecRequest{Command: []string{"/workspace/cdpdirect",
		"-setup=false", "-n", strconv.Itoa(n), "-warm", strconv.Itoa(warm), "-ops", cmp.Or(d.ops, directOps)}, TimeoutMS: 600_000, MaxOutputBytes: 16 << 20})
	if err != nil || res.ExitCode != 0 {
		d.b.Fatalf("direct CDP client: %v %+v", err, res)
	}
	var out map[string][]int64
	if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
		d.b.Fatalf("direct CDP client's output %q: %v", res.Stdout, err)
	}
	for k, us := range out {
		for _, u := range us {
			d.samples[k] = append(d.samples[k], time.Duration(u)*time.Microsecond)
		}
	}
	clicks := 0
	for op := range strings.SplitSeq(cmp.Or(d.ops, directOps), ",") {
		if strings.HasPrefix(op, "click") {
			clicks += n + warm
		}
	}
	return clicks
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sandboxMemMiB is the memory a sandbox's container uses now, as docker
// stats reports it.
func sandboxMemMiB(ctx context.Context, b *testing.B, id string) float64 {
	b.Helper()
	c, err := containerOf(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	out, err := dockerCLI(ctx, "stats", "--no-stream", "--format", "{{.MemUsage}}", c)
	if err != nil {
		b.Fatal(err)
	}
	mib, err := memUsageMiB(out)
	if err != nil {
		b.Fatal(err)
	}
	return mib
}

var memUsageRE = regexp.MustCompile(`^([0-9.]+)\s*([KMG]i?B)`)

// memUsageMiB reads the used part of docker stats' "123.4MiB / 2GiB".
func memUsageMiB(s string) (float64, error) {
	m := memUsageRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("docker stats memory %q", s)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, err
	}
	switch m[2][0] {
	case 'K':
		v /= 1024
	case 'G':
		v *= 1024
	}
	return v, nil
}

// clickConfig is BenchmarkBrowserClick's service: the browser profile and
// no pools.
var clickConfig = "profiles:\n" + `  - name: tool-basic
    recipe: tool-basic
    allowed_runtimes: [runc, runsc]
    default_risk_level: low
    resources: {cpu: 1, memory_mb: 512, pids: 256}
    network: none
    user: "1000:1000"
` + browserProfile("browser-cold", 0)

// clickHops are the hops of an actions request's Server-Timing header
// (browser.ActionTimings), in the order the service writes them.
var clickHops = []string{"pre", "attach", "trace", "actions", "find", "input", "info", "handler"}

// clickPage is the benchmark's page (the same as BenchmarkBrowser's).
const clickPage = `document.body.innerHTML = '<button id="b" style="width:200px;height:80px" onclick="this.textContent = +this.textContent + 1">0</button><div style="height:700px;background:linear-gradient(#39f,#f93)"></div>'; true`

// BenchmarkBrowserClick measures, per runtime, a click by selector through
// the actions API (one action a request) beside the same CDP calls made
// by the direct client inside the sandbox (cdpdirect), and where the
// API's time goes: the service runs with GENESIS_SERVER_TIMING=1 and
// answers each request with a Server-Timing header (pre: routing, key
// check, body; attach: lookup, checks, admission, session; trace: the
// trace's records; actions, of which find (the click's evaluate) and
// input (its press and release, until the page pushed the click's answer
// or Chromium answered both); info: the answer's read of URL and title
// after the actions, when the page pushed none; handler: all of it);
// "outside" is the client's round trip less the handler. The direct client measures its click twice: as it is, and
// after a viewport capture (unmeasured) as the trace takes after each of
// the API's clicks, since a capture makes Chromium's next press and
// release slower. GENESIS_BENCH_BROWSER_CLICKS (default 100) clicks and as
// many evaluates of a constant (the round-trip floor), interleaved, each
// click followed, unmeasured, by the wait until the trace has kept its
// screenshot. With GENESIS_BENCH_BASELINE_BIN (an earlier build's
// sandbox-service, as make bench-speed builds it) a second service runs
// that build with a sandbox of its own, and its calls alternate with this
// build's, call by call (each first every other time), so that both see
// the same machine.
func BenchmarkBrowserClick(b *testing.B) {
	b.Setenv("GENESIS_SERVER_TIMING", "1")
	s := startServiceWith(b, clickConfig)
	var base *service
	if bin := os.Getenv("GENESIS_BENCH_BASELINE_BIN"); bin != "" {
		base = startServiceIn(b, filepath.Dir(bin), clickConfig)
	}
	baseRev := cmp.Or(os.Getenv("GENESIS_BENCH_BASELINE_REV"), "baseline")
	clicks := envInt(b, "GENESIS_BENCH_BROWSER_CLICKS", 100)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute, DisableCompression: true}}
	defer hc.CloseIdleConnections()
	tbl := NewTable("runtime", "measure", "n", "p50 ms", "p90 ms", "p99 ms", "mean ms", "min ms")
	row := func(rt, what string, d []time.Duration) Summary {
		sum := Summarize(d)
		tbl.Row(rt, what, strconv.Itoa(sum.N), FormatMs(sum.P50), FormatMs(sum.P90), FormatMs(sum.P99), FormatMs(sum.Mean), FormatMs(sum.Min))
		return sum
	}
	hops := NewTable(append([]string{"runtime", "percentile"}, append(clickHops, "outside", "total")...)...)
	loadStart := loadAvg()
	s.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		type target struct {
			name    string
			s       *service
			id      string
			cursor  int64
			clicks  int
			click   []time.Duration
			eval    []time.Duration
			timings map[string][]time.Duration
		}
		targets := []*target{{name: "this build", s: s}}
		if base != nil {
			targets = append(targets, &target{name: "build " + baseRev, s: base})
		}
		for _, t := range targets {
			sb, err := t.s.client.CreateSandbox(ctx, client.CreateSandboxRequest{Profile: "browser-cold", Runtime: rt}, "")
			if err != nil {
				b.Fatalf("create (%s, %s): %v", t.name, rt, err)
			}
			t.id, t.timings = sb.ID, map[string][]time.Duration{}
			defer t.s.client.DeleteSandbox(context.Background(), sb.ID)
			if err := t.s.cdpAnswer(ctx, sb.ID); err != nil {
				b.Fatal(err)
			}
			if _, _, err := rawBrowserAction(ctx, hc, t.s, t.id, client.BrowserAction{Type: "evaluate", Expression: clickPage}); err != nil {
				b.Fatal(err)
			}
			for { // the trace so far
				page, err := t.s.client.TracePage(ctx, t.id, t.cursor, 0)
				if err != nil {
					b.Fatal(err)
				}
				if len(page.Events) == 0 {
					break
				}
				t.cursor = page.Next
			}
		}
		// The direct client runs in each build's sandbox in turn (its
		// figures are this build's): a browser it kept busy would idle
		// less before the API's next clicks than the other build's.
		directs := make([]*directCDP, len(targets))
		for k, t := range targets {
			directs[k] = t.s.directCDP(ctx, b, t.id)
			directs[k].ops = "evaluate,click,click-after-shot"
		}
		direct := directs[0]
		// settle waits, unmeasured, until the trace has the screenshot
		// after t's click just made.
		settle := func(t *target) { t.cursor = awaitTraceScreenshot(ctx, b, t.s.client, t.id, t.cursor) }
		const warm = 5
		rounds := min(5, clicks)
		for r := range rounds {
			n := clicks/rounds + btoi(r < clicks%rounds)
			for k := range targets {
				k = (k + r) % len(targets) // which goes last alternates
				targets[k].clicks += directs[k].round(n)
			}
			if r == 0 {
				n += warm
			}
			for i := range n {
				// Which build goes first alternates too.
				for k := range targets {
					t := targets[(k+i)%len(targets)]
					d, st, err := rawBrowserAction(ctx, hc, t.s, t.id, client.BrowserAction{Type: "click", Selector: "#b"})
					if err != nil {
						b.Fatalf("%s: click: %v", t.name, err)
					}
					t.clicks++
					settle(t)
					de, _, err := rawBrowserAction(ctx, hc, t.s, t.id, client.BrowserAction{Type: "evaluate", Expression: "1"})
					if err != nil {
						b.Fatalf("%s: evaluate: %v", t.name, err)
					}
					if r == 0 && i < warm {
						continue
					}
					t.click, t.eval = append(t.click, d), append(t.eval, de)
					if hs, ok := parseHops(st, clickHops); ok {
						for k, v := range hs {
							t.timings[k] = append(t.timings[k], v)
						}
						t.timings["outside"] = append(t.timings["outside"], d-hs["handler"])
						t.timings["total"] = append(t.timings["total"], d)
					}
				}
			}
		}
		for _, t := range targets {
			res, err := t.s.client.BrowserActions(ctx, t.id, client.BrowserAction{Type: "text", Selector: "#b"})
			if err != nil || string(res.Results[0].Value) != strconv.Quote(strconv.Itoa(t.clicks)) {
				b.Fatalf("%s: the button counted %s clicks, want %d (%v)", t.name, res.Results[0].Value, t.clicks, err)
			}
		}
		dc, ds, de := Summarize(direct.samples["click"]), Summarize(direct.samples["click-after-shot"]), Summarize(direct.samples["evaluate"])
		diff := func(what string, c, d Summary) {
			tbl.Row(rt, what, "", fmt.Sprintf("%+.2f", Ms(c.P50-d.P50)), fmt.Sprintf("%+.2f", Ms(c.P90-d.P90)), fmt.Sprintf("%+.2f", Ms(c.P99-d.P99)), "", fmt.Sprintf("%+.2f", Ms(c.Min-d.Min)))
		}
		for _, t := range targets {
			c := row(rt, "click (selector), "+t.name, t.click)
			diff("  − direct, p50 / p90 / p99 / min", c, dc)
			diff("  − direct after a capture", c, ds)
			if t == targets[0] {
				b.ReportMetric(Ms(c.P50-dc.P50), "click-overhead-p50-ms")
				b.ReportMetric(Ms(c.P50-ds.P50), "click-overhead-after-capture-p50-ms")
			}
		}
		recordClickTarget(rt, baseRev, dc, ds, Summarize(targets[0].click), Summarize(targets[len(targets)-1].click), len(targets) > 1)
		row(rt, "click, direct CDP in the sandbox", direct.samples["click"])
		row(rt, "click after a capture (as the trace's), direct CDP", direct.samples["click-after-shot"])
		for _, t := range targets {
			e := row(rt, "evaluate 1, "+t.name, t.eval)
			tbl.Row(rt, "  − direct, p50 / p90 / p99 / min", "", fmt.Sprintf("%+.2f", Ms(e.P50-de.P50)), fmt.Sprintf("%+.2f", Ms(e.P90-de.P90)), fmt.Sprintf("%+.2f", Ms(e.P99-de.P99)), "", fmt.Sprintf("%+.2f", Ms(e.Min-de.Min)))
		}
		row(rt, "evaluate 1, direct CDP in the sandbox", direct.samples["evaluate"])
		tm := targets[0].timings
		for _, pct := range []struct {
			name string
			f    func(Summary) time.Duration
		}{{"p50", func(s Summary) time.Duration { return s.P50 }}, {"p90", func(s Summary) time.Duration { return s.P90 }}, {"min", func(s Summary) time.Duration { return s.Min }}} {
			cells := []string{rt, pct.name}
			for _, h := range append(clickHops, "outside", "total") {
				cells = append(cells, FormatMs(pct.f(Summarize(tm[h]))))
			}
			hops.Row(cells...)
		}
		b.ReportMetric(0, "ns/op")
	})
	fmt.Printf("\nload average at the start: %s\n", loadStart)
	printTable("a click through the actions API vs direct CDP (alternating call by call with the baseline build, rounds with the direct client), ms", tbl)
	printTable("where a click's time goes (this build; Server-Timing), ms; each column is its own percentile", hops)
}

// rawBrowserAction runs action a in sandbox id over the HTTP API and
// answers the client's round trip and the answer's Server-Timing header.
func rawBrowserAction(ctx context.Context, hc *http.Client, s *service, id string, a client.BrowserAction) (time.Duration, string, error) {
	body, err := json.Marshal(client.BrowserActionsRequest{Actions: []client.BrowserAction{a}})
	if err != nil {
		return 0, "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url+client.BrowserPath(id)+"/actions", bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	out, err := io.ReadAll(resp.Body)
	d := time.Since(t0)
	resp.Body.Close()
	if err != nil {
		return 0, "", err
	}
	var res struct {
		OK bool `json:"ok"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &res) != nil || !res.OK {
		return 0, "", fmt.Errorf("%s: %s", resp.Status, out)
	}
	return d, resp.Header.Get("Server-Timing"), nil
}

// parseHops reads a Server-Timing header into durations; false unless it
// has every hop of want (a build that does not time the route).
func parseHops(h string, want []string) (map[string]time.Duration, bool) {
	m := map[string]time.Duration{}
	for part := range strings.SplitSeq(h, ",") {
		name, dur, ok := strings.Cut(strings.TrimSpace(part), ";dur=")
		if ms, err := strconv.ParseFloat(dur, 64); ok && err == nil {
			m[name] = time.Duration(ms * float64(time.Millisecond))
		}
	}
	for _, k := range want {
		if _, ok := m[k]; !ok {
			return nil, false
		}
	}
	return m, true
}

// awaitTraceScreenshot polls sandbox id's trace from cursor until a
// browser screenshot appears (the one captured after a click, kept in the
// background) and returns the cursor after it; a minute without one fails
// the benchmark.
func awaitTraceScreenshot(ctx context.Context, b *testing.B, c *client.Client, id string, cursor int64) int64 {
	deadline := time.Now().Add(time.Minute)
	for {
		page, err := c.TracePage(ctx, id, cursor, 0)
		if err != nil {
			b.Fatal(err)
		}
		cursor = page.Next
		for _, ev := range page.Events {
			if ev.Kind == "browser.screenshot" {
				return cursor
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("no trace screenshot after a click within a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// recordClickTarget records the click row of target 6: this build's click
// through the actions API against direct CDP (as it is and after a
// capture) and, when hasBase, the baseline build's.
func recordClickTarget(rt, baseRev string, direct, directAfterShot, this, base Summary, hasBase bool) {
	r := MsRow(6, "browser click, actions API", rt, this)
	r.Compare = []Compared{{"direct CDP", Ms(direct.P50)}, {"direct CDP after a capture", Ms(directAfterShot.P50)}}
	if hasBase {
		r.Compare = append(r.Compare, Compared{"baseline " + baseRev, Ms(base.P50)})
	}
	r.Verdict = VerdictOf(direct.N > 0 && this.P50-direct.P50 <= time.Millisecond)
	r.Note = fmt.Sprintf("API − direct p50 %+.2f ms (%+.2f after a capture)", Ms(this.P50-direct.P50), Ms(this.P50-directAfterShot.P50))
	recordTarget(r)
}
