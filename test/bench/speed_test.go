package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"genesis.dev/sandbox/client"
	sandboxv1 "genesis.dev/sandbox/gen/genesis/sandbox/v1"
	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
)

// BenchmarkSpeed measures the headline speed figures of `make bench-speed`,
// each beside its comparison in the same interleaved run, and prints one
// table per figure with p50/p90/p99 and the host's load during the run:
//
//   - exec: the round trip of an exec of `true` on a held sandbox over
//     HTTP and gRPC, next to the same on the baseline build, the agent
//     alone (its Unix socket, dialled directly: the floor under the
//     service), GET /healthz (the HTTP floor) and `docker exec`;
//   - lease: warm lease → first `echo hi` output, and how long the
//     release takes to answer, against the baseline build;
//   - cold: create → first `echo hi` output against the baseline build and
//     `docker run --rm --network none` of the same image.
//
// The baseline is another build of sandbox-service (GENESIS_BENCH_BASELINE_BIN,
// with genesis-agent and genesis-egress beside it; `make bench-speed`
// builds the one of git rev BASE) run as a second service on its own port
// and data directory; its label comes from GENESIS_BENCH_BASELINE_REV.
// Requests alternate between the services call by call, the order rotating
// each round, so both see the same machine. Without a baseline only this
// build is measured and each table says so.
//
// Rounds: GENESIS_BENCH_SPEED_EXEC_ITERS (default 300; docker exec in
// GENESIS_BENCH_SPEED_DOCKER_ITERS of them, default 30),
// GENESIS_BENCH_SPEED_LEASE_ITERS (default 100) and
// GENESIS_BENCH_SPEED_COLD_ITERS (default 50), per runtime.
func BenchmarkSpeed(b *testing.B) {
	b.Run("exec", benchSpeedExec)
	b.Run("lease", benchSpeedLease)
	b.Run("cold", benchSpeedCold)
}

// speedPair is this build's service and, when a baseline binary is given,
// the baseline's (nil otherwise).
type speedPair struct {
	cur, base *service
	baseLabel string
}

// startPair starts this build's service and the baseline's, both with
// extraConfig.
func startPair(b *testing.B, extraConfig string) *speedPair {
	b.Helper()
	p := &speedPair{cur: startServiceWith(b, extraConfig)}
	dir := baselineDir(b)
	if dir == "" {
		return p
	}
	p.base = startServiceIn(b, dir, extraConfig)
	p.baseLabel = "baseline"
	if rev := os.Getenv("GENESIS_BENCH_BASELINE_REV"); rev != "" {
		p.baseLabel = "baseline " + rev
	}
	return p
}

// note is what a table says about its baseline.
func (p *speedPair) note() string {
	if p.base == nil {
		return "no baseline: GENESIS_BENCH_BASELINE_BIN is unset, only this build is measured"
	}
	return "this build vs " + p.baseLabel + ", interleaved call by call"
}

// eachRuntime is service.eachRuntime over the runtimes both services can use.
func (p *speedPair) eachRuntime(b *testing.B, fn func(b *testing.B, rt string)) {
	p.cur.eachRuntime(b, func(b *testing.B, rt string) {
		if p.base != nil && !slices.Contains(p.base.runtimes, rt) {
			b.Skipf("runtime %s is not usable for %s by the baseline", rt, profile)
		}
		fn(b, rt)
	})
}

// step is one measured call of an interleaved run; every > 1 runs it only
// in every every-th round.
type step struct {
	name  string
	every int
	run   func(ctx context.Context) error
}

// interleave runs rounds rounds of steps, rotating which step goes first
// each round so that no path always follows the same one.
func interleave(ctx context.Context, rounds int, steps []step) error {
	for r := range rounds {
		for k := range steps {
			st := steps[(r+k)%len(steps)]
			if st.every > 1 && r%st.every != 0 {
				continue
			}
			if err := st.run(ctx); err != nil {
				return fmt.Errorf("%s (round %d): %w", st.name, r, err)
			}
		}
	}
	return nil
}

// timed runs fn and appends its duration to *into when it succeeds.
func timed(into *[]time.Duration, fn func() error) error {
	t0 := time.Now()
	if err := fn(); err != nil {
		return err
	}
	*into = append(*into, time.Since(t0))
	return nil
}

// loadWatch samples the host's 1-minute load average while a run lasts.
type loadWatch struct {
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	samples []float64
}

// watchLoad starts sampling /proc/loadavg every two seconds.
func watchLoad() *loadWatch {
	w := &loadWatch{stop: make(chan struct{}), done: make(chan struct{})}
	w.sample()
	go func() {
		defer close(w.done)
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				w.sample()
			}
		}
	}()
	return w
}

func (w *loadWatch) sample() {
	f := strings.Fields(loadAvg())
	if len(f) == 0 {
		return
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return
	}
	w.mu.Lock()
	w.samples = append(w.samples, v)
	w.mu.Unlock()
}

// stopSamples stops sampling and answers the samples taken, a last one
// included.
func (w *loadWatch) stopSamples() []float64 {
	close(w.stop)
	<-w.done
	w.sample()
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.samples)
}

// end stops sampling and describes the load seen.
func (w *loadWatch) end() string {
	samples := w.stopSamples()
	if len(samples) == 0 {
		return "1-min load during the run unknown"
	}
	return "1-min load during the run: " + LoadStats(samples)
}

// serviceCPU is the CPU time of the service's process so far (user and
// system, children excluded), or 0 when it cannot be read.
func (s *service) serviceCPU() time.Duration {
	d, _ := processCPU(s.cmd.Process.Pid)
	return d
}

// row is one line of a speed table: a path, its sample and what to compare
// it with.
type row struct {
	path    string
	s       Summary
	vs      string // comparison cell: "0.85×" or ""
	target  string // target cell: "p50 ≤ 2.5 ms: met" or ""
	missing string // why there is no sample
}

func addRows(t *Table, rt string, rows []row) {
	for _, r := range rows {
		if r.missing != "" {
			t.Row(rt, r.path, "0", "", "", "", "", r.missing)
			continue
		}
		t.Row(rt, r.path, strconv.Itoa(r.s.N), FormatMs(r.s.P50), FormatMs(r.s.P90), FormatMs(r.s.P99), r.vs, r.target)
	}
}

// ratio is a's p50 over b's as "0.85×", or "" without b.
func ratio(a, b Summary) string {
	if b.N == 0 || b.P50 == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f×", float64(a.P50)/float64(b.P50))
}

// verdict says whether s meets p50 ≤ p50max (and p99 ≤ p99max when that is
// not 0).
func verdict(s Summary, p50max, p99max time.Duration) string {
	want := "p50 ≤ " + FormatMs(p50max)
	ok := s.P50 <= p50max
	if p99max > 0 {
		want += ", p99 ≤ " + FormatMs(p99max)
		ok = ok && s.P99 <= p99max
	}
	if ok {
		return want + ": met"
	}
	return want + ": NOT met"
}

// grpcExec returns a call of ExecService/Exec of `true` in sandbox id of s.
func grpcExec(b *testing.B, s *service, id string) func(ctx context.Context) error {
	cc, err := grpc.NewClient("passthrough:///"+s.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	return func(ctx context.Context) error {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+s.key)
		var res sandboxv1.ExecResult
		err := cc.Invoke(ctx, "/genesis.sandbox.v1.ExecService/Exec", &sandboxv1.ExecRequest{SandboxId: id, Command: []string{"true"}}, &res)
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("true exited %d", res.ExitCode)
		}
		return err
	}
}

// httpExec returns a call of POST /v1/sandboxes/{id}/exec of `true` on s.
func httpExec(s *service, id string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		res, err := s.client.Exec(ctx, id, client.ExecRequest{Command: []string{"true"}})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("true exited %d (%s): %q", res.ExitCode, res.ExitReason, res.Stderr)
		}
		return err
	}
}

// agentSocket is the host path of the Unix socket of a sandbox's agent in
// a service's data directory (the Docker driver's layout).
func (s *service) agentSocket(id string) string {
	return filepath.Join(s.dataDir, "sandboxes", id, "run", "agent.sock")
}

// benchSpeedExec: exec of `true` on one held sandbox per service.
func benchSpeedExec(b *testing.B) {
	p := startPair(b, "")
	rounds := envInt(b, "GENESIS_BENCH_SPEED_EXEC_ITERS", 300)
	dockerN := envInt(b, "GENESIS_BENCH_SPEED_DOCKER_ITERS", 30)
	const warmup = 10
	tbl := NewTable("runtime", "path", "n", "p50 ms", "p90 ms", "p99 ms", "vs baseline p50", "target (issue 40 #1)")
	var cpuNotes []string
	watch := watchLoad()
	p.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
		defer cancel()
		// Each build's sandbox gets the same calls in a round: its exec
		// over HTTP and gRPC, its service's /healthz, an exec on its
		// agent's socket and, every so often, a docker exec. A sandbox
		// that sees more calls idles less between them and answers faster
		// (its threads, and under gVisor the sentry's, are still awake):
		// when the floors were measured on this build's sandbox only, a
		// run of one build against itself read this build 0.90× under
		// runsc.
		cur, base := &execPaths{}, &execPaths{}
		steps, agentMissing := cur.steps(ctx, b, p.cur, rt, "", rounds/dockerN)
		if p.base != nil {
			bsteps, _ := base.steps(ctx, b, p.base, rt, "baseline ", rounds/dockerN)
			steps = append(steps, bsteps...)
		}

		// Warm-up: every path, not recorded.
		if err := interleave(ctx, warmup, steps); err != nil {
			b.Fatalf("warm-up (%s): %v", rt, err)
		}
		*cur, *base = execPaths{}, execPaths{}
		cpu0, bcpu0 := p.cur.serviceCPU(), time.Duration(0)
		if p.base != nil {
			bcpu0 = p.base.serviceCPU()
		}
		if err := interleave(ctx, rounds, steps); err != nil {
			b.Fatalf("%s: %v", rt, err)
		}
		cpuNotes = append(cpuNotes, fmt.Sprintf("%s: service CPU per exec (HTTP+gRPC, /healthz included) this build %.2f ms",
			rt, Ms(p.cur.serviceCPU()-cpu0)/float64(len(cur.http)+len(cur.grpc))))
		if p.base != nil {
			cpuNotes[len(cpuNotes)-1] += fmt.Sprintf(", %s %.2f ms", p.baseLabel, Ms(p.base.serviceCPU()-bcpu0)/float64(len(base.http)+len(base.grpc)))
		}

		ch, cg, bh, bg := Summarize(cur.http), Summarize(cur.grpc), Summarize(base.http), Summarize(base.grpc)
		agent, health, dexec := Summarize(cur.agent), Summarize(cur.health), Summarize(cur.docker)
		target := func(s Summary) string {
			if rt == "runc" {
				return verdict(s, 2500*time.Microsecond, 6*time.Millisecond)
			}
			return verdict(s, 14*time.Millisecond, 0)
		}
		rows := []row{
			{path: "this build, HTTP", s: ch, vs: ratio(ch, bh), target: target(ch)},
			{path: "this build, gRPC", s: cg, vs: ratio(cg, bg)},
		}
		if p.base != nil {
			rows = append(rows, row{path: p.baseLabel + ", HTTP", s: bh}, row{path: p.baseLabel + ", gRPC", s: bg})
		}
		rows = append(rows,
			row{path: "agent socket directly (floor)", s: agent, vs: ratio(agent, Summarize(base.agent)), missing: agentMissing},
			row{path: "GET /healthz (HTTP floor)", s: health, vs: ratio(health, Summarize(base.health))},
			row{path: "docker exec (CLI)", s: dexec})
		addRows(tbl, rt, rows)
		recordSpeedExec(rt, p, ch, cg, bh, bg, agent, health, dexec, cpuNotes[len(cpuNotes)-1])
		reportSummary(b, "http-", ch)
		reportSummary(b, "grpc-", cg)
		if p.base != nil {
			b.ReportMetric(Ms(bh.P50), "base-http-p50-ms")
			b.ReportMetric(Ms(bg.P50), "base-grpc-p50-ms")
		}
		b.ReportMetric(Ms(agent.P50), "agent-p50-ms")
		b.ReportMetric(Ms(dexec.P50), "docker-exec-p50-ms")
	})
	load := watch.end()
	printTable(fmt.Sprintf("speed: exec `true` round trip on a held sandbox, ms (%s; %d rounds after %d warm-ups; %s)", profile, rounds, warmup, p.note()), tbl)
	fmt.Println(load)
	for _, n := range cpuNotes {
		fmt.Println(n)
	}
}

// execPaths are the round trips of one build's held sandbox in
// benchSpeedExec.
type execPaths struct {
	http, grpc, health, agent, docker []time.Duration
}

// steps creates a sandbox of runtime rt on s (removed when the benchmark
// ends) and answers the steps that time each of its paths into e (names
// prefixed by label), a docker exec every dockerEvery rounds, and why its
// agent's socket could not be dialled, if so (then there is no agent
// step).
func (e *execPaths) steps(ctx context.Context, b *testing.B, s *service, rt, label string, dockerEvery int) ([]step, string) {
	b.Helper()
	sb, err := s.create(ctx, rt)
	if err != nil {
		b.Fatalf("%screate (%s): %v", label, rt, err)
	}
	b.Cleanup(func() {
		if err := s.remove(context.Background(), sb.ID); err != nil {
			b.Error(err)
		}
	})
	steps := []step{
		{name: label + "HTTP exec", run: wrap(&e.http, httpExec(s, sb.ID))},
		{name: label + "gRPC exec", run: wrap(&e.grpc, grpcExec(b, s, sb.ID))},
		{name: label + "GET /healthz", run: wrap(&e.health, func(ctx context.Context) error {
			_, err := s.client.Health(ctx)
			return err
		})},
	}
	// The agent alone: its socket dialled directly, as the service does,
	// with nothing of the service in between.
	var missing string
	if _, err := os.Stat(s.agentSocket(sb.ID)); err != nil {
		missing = fmt.Sprintf("agent socket not found: %v", err)
	} else {
		ac := agentclient.Dial(s.agentSocket(sb.ID))
		b.Cleanup(ac.Close)
		steps = append(steps, step{name: label + "agent exec", run: wrap(&e.agent, func(ctx context.Context) error {
			res, err := ac.Exec(ctx, agentproto.ExecRequest{Command: []string{"true"}})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("true exited %d", res.ExitCode)
			}
			return err
		})})
	}
	container, err := containerOf(ctx, sb.ID)
	if err != nil {
		b.Fatal(err)
	}
	return append(steps, step{name: label + "docker exec", every: max(1, dockerEvery), run: wrap(&e.docker, func(ctx context.Context) error {
		_, err := dockerCLI(ctx, "exec", container, "true")
		return err
	})}), missing
}

// wrap is a step's run that times call into *into.
func wrap(into *[]time.Duration, call func(ctx context.Context) error) func(ctx context.Context) error {
	return func(ctx context.Context) error { return timed(into, func() error { return call(ctx) }) }
}

// speedPoolProfile is the profile of the lease figure: the benchmark
// profile, redefined with pools of two idle members under runc and runsc;
// released sandboxes are destroyed (the pool makes fresh ones after the
// answer).
const speedPoolProfile = profile

var speedLeaseConfig = fmt.Sprintf(`warm_pools: true
profiles:
  - name: %s
    recipe: %s
    allowed_runtimes: [runc, runsc]
    default_risk_level: low
    resources: {cpu: 1, memory_mb: 512, pids: 256}
    network: none
    user: "1000:1000"
    pools: [{runtime: runc, min_idle: 2, max_total: 4}, {runtime: runsc, min_idle: 2, max_total: 4}]
    lease: {default_ttl_seconds: 600, max_ttl_seconds: 3600, on_release: destroy}
`, speedPoolProfile, profile)

// leaseSample is the parts of one lease → echo → release cycle.
type leaseSample struct {
	lease, echo, total, release []time.Duration
	second                      []time.Duration // a second echo in the same lease: what is the first exec's own
}

// leaseCycle leases a warm sandbox of s once the pools of all (both
// services) have settled, so that neither refills while the other is
// measured; it runs `echo hi` in it and releases it, timing each part into
// into.
func leaseCycle(b *testing.B, s *service, all []*service, rt string, into *leaseSample) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		// s last: the lease then follows a call on its own service's
		// connection whichever service is measured (with a fixed order,
		// one build's lease came after a call to the other service only
		// and read ≈ 0.35 ms slower in a run of a build against itself).
		for _, o := range all {
			if o != s {
				o.waitSettled(b, speedPoolProfile+"-"+rt)
			}
		}
		s.waitSettled(b, speedPoolProfile+"-"+rt)
		ttl := int64(300)
		t0 := time.Now()
		l, err := s.client.AcquireLease(ctx, client.AcquireLeaseRequest{Profile: speedPoolProfile, Runtime: rt, TTLSeconds: &ttl})
		t1 := time.Now()
		if err != nil {
			return fmt.Errorf("lease: %w", err)
		}
		res, err := s.client.Exec(ctx, l.SandboxID, client.ExecRequest{Command: []string{"echo", "hi"}})
		t2 := time.Now()
		var res2 *client.ExecResult
		var err2 error
		if err == nil {
			res2, err2 = s.client.Exec(ctx, l.SandboxID, client.ExecRequest{Command: []string{"echo", "hi"}})
		}
		t2b := time.Now()
		rerr := s.client.ReleaseLease(ctx, l.LeaseID)
		t3 := time.Now()
		switch {
		case err2 != nil:
			return fmt.Errorf("second echo in %s: %w", l.SandboxID, err2)
		case err == nil && res2.Stdout != "hi\n":
			return fmt.Errorf("second echo in %s: exit %d, stdout %q", l.SandboxID, res2.ExitCode, res2.Stdout)
		case err != nil:
			return fmt.Errorf("first echo in %s: %w", l.SandboxID, err)
		case res.ExitCode != 0 || res.Stdout != "hi\n":
			return fmt.Errorf("first echo in %s: exit %d, stdout %q", l.SandboxID, res.ExitCode, res.Stdout)
		case rerr != nil:
			return fmt.Errorf("release %s: %w", l.LeaseID, rerr)
		case !l.Warm:
			return fmt.Errorf("lease %s was not served warm although its pool had settled", l.LeaseID)
		}
		into.lease = append(into.lease, t1.Sub(t0))
		into.echo = append(into.echo, t2.Sub(t1))
		into.total = append(into.total, t2.Sub(t0))
		into.second = append(into.second, t2b.Sub(t2))
		into.release = append(into.release, t3.Sub(t2b))
		return nil
	}
}

// benchSpeedLease: warm lease → first echo, and the release's answer.
func benchSpeedLease(b *testing.B) {
	p := startPair(b, speedLeaseConfig)
	rounds := envInt(b, "GENESIS_BENCH_SPEED_LEASE_ITERS", 100)
	tbl := NewTable("runtime", "path", "n", "p50 ms", "p90 ms", "p99 ms", "vs baseline p50", "target (issue 40 #2)")
	watch := watchLoad()
	p.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
		defer cancel()
		var cur, base leaseSample
		all := []*service{p.cur}
		if p.base != nil {
			all = append(all, p.base)
		}
		steps := []step{{name: "lease cycle", run: leaseCycle(b, p.cur, all, rt, &cur)}}
		if p.base != nil {
			steps = append(steps, step{name: "baseline lease cycle", run: leaseCycle(b, p.base, all, rt, &base)})
		}
		if err := interleave(ctx, rounds, steps); err != nil {
			b.Fatalf("%s: %v", rt, err)
		}
		first := 3 * time.Millisecond
		if rt != "runc" {
			first = 15 * time.Millisecond
		}
		ct, bt := Summarize(cur.total), Summarize(base.total)
		cr, br := Summarize(cur.release), Summarize(base.release)
		rows := []row{
			{path: "this build: lease → first echo", s: ct, vs: ratio(ct, bt), target: verdict(ct, first, 0)},
			{path: "  of which lease", s: Summarize(cur.lease), vs: ratio(Summarize(cur.lease), Summarize(base.lease))},
			{path: "  of which first echo", s: Summarize(cur.echo), vs: ratio(Summarize(cur.echo), Summarize(base.echo))},
			{path: "  (a second echo, same lease)", s: Summarize(cur.second), vs: ratio(Summarize(cur.second), Summarize(base.second))},
			{path: "this build: release answers", s: cr, vs: ratio(cr, br), target: verdict(cr, 10*time.Millisecond, 0)},
		}
		if p.base != nil {
			rows = append(rows,
				row{path: p.baseLabel + ": lease → first echo", s: bt},
				row{path: "  of which lease", s: Summarize(base.lease)},
				row{path: "  of which first echo", s: Summarize(base.echo)},
				row{path: "  (a second echo, same lease)", s: Summarize(base.second)},
				row{path: p.baseLabel + ": release answers", s: br})
		}
		addRows(tbl, rt, rows)
		recordSpeedLease(rt, p, ct, bt, cr, br, first, fmt.Sprintf("of which lease p50 %s ms, first echo %s ms", FormatMs(Summarize(cur.lease).P50), FormatMs(Summarize(cur.echo).P50)))
		reportSummary(b, "first-echo-", ct)
		b.ReportMetric(Ms(cr.P50), "release-p50-ms")
		b.ReportMetric(Ms(cr.P99), "release-p99-ms")
		if p.base != nil {
			b.ReportMetric(Ms(bt.P50), "base-first-echo-p50-ms")
			b.ReportMetric(Ms(br.P50), "base-release-p50-ms")
		}
	})
	load := watch.end()
	printTable(fmt.Sprintf("speed: warm lease → first echo output, and release, ms (pool of 2 idle, each cycle with both services' pools settled; %d rounds; %s)", rounds, p.note()), tbl)
	fmt.Println(load)
}

// coldCycle creates a sandbox of s, runs `echo hi` in it and deletes it
// (outside the time), timing create → output into total and its parts.
func coldCycle(s *service, rt string, total, create *[]time.Duration) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		t0 := time.Now()
		sb, err := s.create(ctx, rt)
		t1 := time.Now()
		if err != nil {
			return fmt.Errorf("create: %w", err)
		}
		res, err := s.client.Exec(ctx, sb.ID, client.ExecRequest{Command: []string{"echo", "hi"}})
		t2 := time.Now()
		if derr := s.remove(ctx, sb.ID); derr != nil {
			return derr
		}
		switch {
		case err != nil:
			return fmt.Errorf("first exec in %s: %w", sb.ID, err)
		case res.ExitCode != 0 || res.Stdout != "hi\n":
			return fmt.Errorf("first exec in %s: exit %d (%s), stdout %q, stderr %q", sb.ID, res.ExitCode, res.ExitReason, res.Stdout, res.Stderr)
		}
		*total = append(*total, t2.Sub(t0))
		*create = append(*create, t1.Sub(t0))
		return nil
	}
}

// benchSpeedCold: cold create → first output, against `docker run`.
func benchSpeedCold(b *testing.B) {
	p := startPair(b, "")
	rounds := envInt(b, "GENESIS_BENCH_SPEED_COLD_ITERS", 50)
	image := profileImage(b, p.cur)
	tbl := NewTable("runtime", "path", "n", "p50 ms", "p90 ms", "p99 ms", "vs docker run p50", "target (issue 40 #3)")
	watch := watchLoad()
	p.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
		defer cancel()
		var cur, curCreate, base, baseCreate, drun []time.Duration
		steps := []step{
			{name: "cold create", run: coldCycle(p.cur, rt, &cur, &curCreate)},
			// The same image, user and limits as the profile's sandboxes.
			{name: "docker run", run: wrap(&drun, func(ctx context.Context) error {
				out, err := dockerCLI(ctx, "run", "--rm", "--network", "none", "--runtime", rt, "--user", "1000:1000",
					"--cpus", "1", "--memory", "512m", "--pids-limit", "256", image, "echo", "hi")
				if err == nil && out != "hi" {
					err = fmt.Errorf("docker run printed %q", out)
				}
				return err
			})},
		}
		if p.base != nil {
			steps = append(steps, step{name: "baseline cold create", run: coldCycle(p.base, rt, &base, &baseCreate)})
		}
		if err := interleave(ctx, rounds, steps); err != nil {
			b.Fatalf("%s: %v", rt, err)
		}
		cs, bs, ds := Summarize(cur), Summarize(base), Summarize(drun)
		factor := 0.8
		if rt != "runc" {
			factor = 0.9
		}
		target := fmt.Sprintf("≤ %.1f× docker run: ", factor)
		if float64(cs.P50) <= factor*float64(ds.P50) {
			target += "met"
		} else {
			target += "NOT met"
		}
		rows := []row{
			{path: "this build: create → first output", s: cs, vs: ratio(cs, ds), target: target},
			{path: "  of which create", s: Summarize(curCreate)},
		}
		if p.base != nil {
			rows = append(rows,
				row{path: p.baseLabel + ": create → first output", s: bs, vs: ratio(bs, ds)},
				row{path: "  of which create", s: Summarize(baseCreate)})
		}
		rows = append(rows, row{path: "docker run --rm --network none", s: ds})
		addRows(tbl, rt, rows)
		tr := MsRow(3, "cold create → first output", rt, cs)
		tr.Compare = []Compared{{"docker run --rm --network none", Ms(ds.P50)}}
		if p.base != nil {
			tr.Compare = append(tr.Compare, Compared{p.baseLabel, Ms(bs.P50)})
		}
		tr.Verdict = VerdictOf(ds.N > 0 && float64(cs.P50) <= factor*float64(ds.P50))
		tr.Note = fmt.Sprintf("%s docker run; of which create p50 %s ms", ratio(cs, ds), FormatMs(Summarize(curCreate).P50))
		recordTarget(tr)
		reportSummary(b, "", cs)
		b.ReportMetric(Ms(ds.P50), "docker-run-p50-ms")
		if p.base != nil {
			b.ReportMetric(Ms(bs.P50), "base-p50-ms")
		}
	})
	load := watch.end()
	printTable(fmt.Sprintf("speed: cold create → first output vs docker run of the same image, ms (%s; %d rounds; %s)", image, rounds, p.note()), tbl)
	fmt.Println(load)
}

// profileImage is the image of the benchmark profile on s.
func profileImage(b *testing.B, s *service) string {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	profs, err := s.client.Profiles(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for _, pr := range profs.Items {
		if pr.Name == profile {
			return pr.Image
		}
	}
	b.Fatalf("profile %s not found", profile)
	return ""
}

// recordSpeedExec records the exec rows of the targets summary (target 1).
func recordSpeedExec(rt string, p *speedPair, ch, cg, bh, bg, agent, health, dexec Summary, cpuNote string) {
	for _, v := range []struct {
		how        string
		this, base Summary
	}{{"HTTP", ch, bh}, {"gRPC", cg, bg}} {
		r := MsRow(1, "exec `true`, "+v.how, rt, v.this)
		if p.base != nil {
			r.Compare = append(r.Compare, Compared{p.baseLabel, Ms(v.base.P50)})
		}
		r.Compare = append(r.Compare, Compared{"agent socket (floor)", Ms(agent.P50)}, Compared{"docker exec", Ms(dexec.P50)})
		r.Verdict = NoTarget
		if v.how == "HTTP" {
			r.Compare = append(r.Compare, Compared{"GET /healthz", Ms(health.P50)})
			r.Note = strings.TrimPrefix(cpuNote, rt+": ")
			if rt == "runc" {
				r.Verdict = VerdictOf(v.this.P50 <= 2500*time.Microsecond && v.this.P99 <= 6*time.Millisecond)
			} else {
				r.Verdict = VerdictOf(v.this.P50 <= 14*time.Millisecond)
			}
		}
		recordTarget(r)
	}
}

// recordSpeedLease records the lease rows of the targets summary (target
// 2).
func recordSpeedLease(rt string, p *speedPair, ct, bt, cr, br Summary, first time.Duration, parts string) {
	r := MsRow(2, "warm lease → first echo", rt, ct)
	r.Note = parts
	rel := MsRow(2, "release answers", rt, cr)
	if p.base != nil {
		r.Compare = []Compared{{p.baseLabel, Ms(bt.P50)}}
		rel.Compare = []Compared{{p.baseLabel, Ms(br.P50)}}
	}
	r.Verdict = VerdictOf(ct.P50 <= first)
	rel.Verdict = VerdictOf(cr.P50 <= 10*time.Millisecond)
	recordTarget(r)
	recordTarget(rel)
}
