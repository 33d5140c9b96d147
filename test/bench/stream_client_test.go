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

	"genesis.dev/sandbox/client"
)

// clientPath is one way BenchmarkStreamClient reads a job's output.
type clientPath struct {
	name, metric string
	// run reads, with encoding enc, the output of the benchmark job (live)
	// or of the finished job last (a replay) into c.
	run func(ctx context.Context, c *clientCount, sandboxID, last, enc string) error
}

// clientCount checks the events an SDK user receives: the output of the
// benchmark job (benchLine repeated) continues without gap from offset 0
// and holds exactly the expected bytes, and the exit event ends it.
type clientCount struct {
	want   []byte // benchLine+"\n" repeated, longer than any event by a line
	next   int64
	events int
	exit   *client.ExitEvent
	exitAt time.Time
	jobID  string
	// wall and cpu, if set, are the reader's own measure of the run and
	// of its CPU time (a Python reader, in another process).
	wall, cpu time.Duration
}

func (c *clientCount) event(ev client.LogEvent) error {
	c.events++
	switch ev.Event {
	case client.EventJob:
		c.jobID = ev.Job.ID
	case client.EventStdout:
		if ev.Offset != c.next {
			return fmt.Errorf("stdout event %s at offset %d, want %d", ev.ID, ev.Offset, c.next)
		}
		line := int64(len(benchLine) + 1)
		for p, off := ev.Data, ev.Offset; len(p) > 0; {
			at := off % line
			n := min(len(p), len(c.want)-int(at))
			if !bytes.Equal(p[:n], c.want[at:at+int64(n)]) {
				return fmt.Errorf("stdout event %s: the bytes from offset %d are not the job's output", ev.ID, off)
			}
			p, off = p[n:], off+int64(n)
		}
		c.next += int64(len(ev.Data))
	case client.EventExit:
		c.exit, c.exitAt = ev.Exit, time.Now()
		c.jobID = ev.Exit.JobID
	default:
		return fmt.Errorf("unexpected %s event %s", ev.Event, ev.ID)
	}
	return nil
}

// BenchmarkStreamClient measures, per runtime, how fast a job's stdout
// reaches a user of the public Go client: a job writing
// GENESIS_BENCH_CLIENT_STREAM_MIB (default 256) MiB of log lines
// (benchLine, cat of a file, as in BenchmarkStreamThroughput), read live
// with client.ExecStream and then replayed from its finished log with
// client.StreamLogs, with the default base64 encoding and with text; the
// paths and encodings alternate within each of GENESIS_BENCH_STREAM_RUNS
// (default 5; with a baseline, rounded up to an even count, so that each
// build leads half of them) rounds, so a change of machine load hits all of them. Each
// event's bytes are checked against the job's known output. The client is
// client.New over a clone of http.DefaultTransport (what an SDK user gets
// with no options; a clone, so that the benchmark can close it). Reported: MiB/s (decoded bytes over request sent → exit event)
// at the median and at the 90th-percentile run time, and the CPU seconds
// per GiB of the service, of this process (the client) and of the
// sandbox's cgroup, medians over the rounds. With
// GENESIS_BENCH_BASELINE_BIN (a directory holding an earlier build's
// sandbox-service and genesis-agent) a second service of that build runs
// beside this one and each round reads every path and encoding from both
// in turn, so that both see the same machine load; rows say which build.
// GENESIS_BENCH_STREAM_PYTHON=0 leaves the Python SDK's rows out.
func BenchmarkStreamClient(b *testing.B) {
	s := startService(b)
	builds := []*streamBuild{{name: "this", s: s}}
	if dir := baselineDir(b); dir != "" {
		builds = append(builds, &streamBuild{name: "baseline", s: startServiceFrom(b, dir, "", "warn")})
	}
	total := int64(envInt(b, "GENESIS_BENCH_CLIENT_STREAM_MIB", 256)) << 20
	rounds := envInt(b, "GENESIS_BENCH_STREAM_RUNS", 5)
	if len(builds) == 2 && rounds%2 == 1 {
		// Each build leads as many rounds as the other (leading costs,
		// below): with an odd count, one build's cells have one led run
		// more than the other's.
		rounds++
		fmt.Printf("stream client: %d rounds, so that each build leads half of them\n", rounds)
	}
	for _, bd := range builds {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		b.Cleanup(tr.CloseIdleConnections)
		bd.sdk = client.New(bd.s.url, bd.s.key, client.WithHTTPClient(&http.Client{Transport: tr}))
		bd.api = newRawAPI(b, bd.s)
	}
	want := bytes.Repeat([]byte(benchLine+"\n"), (4<<20)/(len(benchLine)+1)+2)
	py, pyWhy := pythonWithHTTPX()
	if os.Getenv("GENESIS_BENCH_STREAM_PYTHON") == "0" {
		py, pyWhy = "", "GENESIS_BENCH_STREAM_PYTHON=0"
	}
	if py == "" {
		fmt.Printf("stream client: no Python SDK rows: %s\n", pyWhy)
	}
	tbl := NewTable("runtime", "build", "path", "encoding", "n", "MiB/s p50", "MiB/s p90", "min", "max", "events",
		"CPU s/GiB: service", "client", "sandbox")
	var job string
	s.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
		defer cancel()
		for _, bd := range builds {
			s := bd.s
			sb, err := s.createWith(ctx, rt, &client.Resources{MemoryMB: streamMemoryMB})
			if err != nil {
				b.Fatalf("create (%s, %s build): %v", rt, bd.name, err)
			}
			bd.sandboxID = sb.ID
			defer func() {
				if err := s.remove(ctx, sb.ID); err != nil {
					b.Error(err)
				}
			}()
			req, how, err := bulkJob(ctx, s, bd.api, sb.ID, total)
			if err != nil {
				b.Fatal(err)
			}
			// After bulkJob's first exec: a sandbox's container may start
			// with it.
			bd.cg, err = sandboxCgroup(ctx, sb.ID)
			if err != nil {
				fmt.Printf("stream client (%s): sandbox CPU not shown: %v\n", rt, err)
			}
			if req.MaxOutputBytes != total {
				b.Skipf("stream client (%s): the service refuses a %d-byte cap on one stream (%s)", rt, total, how)
			}
			job = how
			sdk := bd.sdk
			bd.paths = []clientPath{
				{"exec (live)", "exec", func(ctx context.Context, c *clientCount, id, _, enc string) error {
					return sdk.ExecStream(ctx, id, req, client.StreamOptions{Encoding: enc}, c.event)
				}},
				{"logs (replay)", "logs", func(ctx context.Context, c *clientCount, _, last, enc string) error {
					return sdk.StreamLogs(ctx, last, client.StreamOptions{Encoding: enc}, c.event)
				}},
			}
			if py != "" {
				bd.paths = append(bd.paths, clientPath{"python exec (live)", "python-exec", func(ctx context.Context, c *clientCount, id, _, enc string) error {
					return pythonStream(ctx, py, s, id, req, enc, c)
				}})
			}
		}
		type cell struct {
			walls                    []time.Duration
			service, client, sandbox []float64 // CPU s per GiB
			events                   int
		}
		cells := map[string]*cell{}
		key := func(bd, p, enc string) string { return bd + "\x00" + p + "\x00" + enc }
		b.ReportMetric(0, "ns/op")
		for round := range rounds {
			// Each round starts with another build: a build that always
			// ran first paid for it (a replay, the same code in both
			// builds, cost 2-19% more in the build that led every round).
			order := slices.Clone(builds)
			slices.Reverse(order[:round%len(order)])
			slices.Reverse(order[round%len(order):])
			slices.Reverse(order)
			for _, enc := range []string{client.EncodingBase64, client.EncodingText} {
				for _, bd := range order {
					s, cg := bd.s, bd.cg
					last := ""
					for _, p := range bd.paths {
						c := &clientCount{want: want}
						c0, err := s.cpu(cg)
						if err != nil {
							b.Fatal(err)
						}
						start := time.Now()
						err = p.run(ctx, c, bd.sandboxID, last, enc)
						jobID := c.jobID
						if err == nil && (c.exit == nil || c.exit.ExitCode == nil || *c.exit.ExitCode != 0) {
							err = fmt.Errorf("job %s did not exit 0: %+v", jobID, c.exit)
						}
						if err == nil && (c.next != total || c.exit.StdoutBytes != total) {
							err = fmt.Errorf("job %s: %d bytes of stdout delivered, the exit event counts %d; want %d", jobID, c.next, c.exit.StdoutBytes, total)
						}
						if err != nil {
							b.Fatalf("%s %s (%s): %v", p.name, enc, rt, err)
						}
						wall := c.exitAt.Sub(start)
						if c.wall > 0 {
							wall = c.wall
						}
						// Keep the recording of the job's end out of the next run.
						if _, err := s.waitFinal(ctx, jobID); err != nil {
							b.Fatal(err)
						}
						c1, err := s.cpu(cg)
						if err != nil {
							b.Fatal(err)
						}
						d := c1.sub(c0)
						gib := float64(total) / (1 << 30)
						k := key(bd.name, p.name, enc)
						if cells[k] == nil {
							cells[k] = &cell{}
						}
						cl := cells[k]
						cl.walls = append(cl.walls, wall)
						cl.service = append(cl.service, d.service.Seconds()/gib)
						if c.wall > 0 {
							d.client = c.cpu
						}
						cl.client = append(cl.client, d.client.Seconds()/gib)
						if d.sandboxOK {
							cl.sandbox = append(cl.sandbox, d.sandbox.Seconds()/gib)
						}
						cl.events = c.events
						last = jobID
					}
				}
			}
		}
		mib := float64(total) / (1 << 20)
		recordStreamTargets(rt, mib, func(build, path, enc string) ([]time.Duration, []float64) {
			if cl := cells[key(build, path, enc)]; cl != nil {
				return cl.walls, cl.service
			}
			return nil, nil
		})
		for _, bd := range builds {
			for _, p := range bd.paths {
				for _, enc := range []string{client.EncodingBase64, client.EncodingText} {
					cl := cells[key(bd.name, p.name, enc)]
					sum := Summarize(cl.walls)
					rate := func(d time.Duration) float64 { return mib / d.Seconds() }
					metric := p.metric + "-" + enc
					if bd.name != "this" {
						metric = bd.name + "-" + metric
					}
					b.ReportMetric(rate(sum.P50), metric+"-MiB/s")
					b.ReportMetric(median(cl.service), metric+"-service-CPU-s/GiB")
					sbCPU := "n/a"
					if len(cl.sandbox) > 0 {
						sbCPU = fmt.Sprintf("%.2f", median(cl.sandbox))
					}
					tbl.Row(rt, bd.name, p.name, enc, strconv.Itoa(sum.N), fmt.Sprintf("%.0f", rate(sum.P50)), fmt.Sprintf("%.0f", rate(sum.P90)),
						fmt.Sprintf("%.0f", rate(sum.Max)), fmt.Sprintf("%.0f", rate(sum.Min)), strconv.Itoa(cl.events),
						fmt.Sprintf("%.2f", median(cl.service)), fmt.Sprintf("%.2f", median(cl.client)), sbCPU)
				}
			}
		}
	})
	printTable(fmt.Sprintf("job stdout → public Go client (client.New, default transport), %d MiB (%s)",
		envInt(b, "GENESIS_BENCH_CLIENT_STREAM_MIB", 256), profile), tbl)
	fmt.Printf("job: %s.\nexec (live): client.ExecStream; logs (replay): client.StreamLogs of that job's finished log.\n"+
		"MiB/s: decoded stdout over request sent → exit event delivered, at the median and the 90th-percentile run time;\n"+
		"python exec (live): Sandbox.exec_stream of the repository's Python SDK (stream_client.py, its own clock and CPU time);\n"+
		"CPU s/GiB: medians over the rounds (client: this whole process, or the Python process).\n", job)
}

// streamBuild is one service BenchmarkStreamClient reads from: this
// tree's build, or a baseline.
type streamBuild struct {
	name      string
	s         *service
	sdk       *client.Client
	api       *rawAPI
	sandboxID string
	cg        *cgroupCPU
	paths     []clientPath
}

// median is the middle value of xs (the mean of the two middle ones for
// an even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// pythonWithHTTPX returns the Python interpreter of the SDK rows
// (GENESIS_BENCH_PYTHON, default /usr/bin/python3) if it has httpx, else
// "" and why not.
func pythonWithHTTPX() (string, string) {
	py := os.Getenv("GENESIS_BENCH_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if out, err := exec.Command(py, "-c", "import httpx").CombinedOutput(); err != nil {
		return "", fmt.Sprintf("%s cannot import httpx (apt-get install python3-httpx): %v %s", py, err, bytes.TrimSpace(out))
	}
	return py, ""
}

// pythonStream runs req's script through the Python SDK's exec_stream
// (stream_client.py) and fills c with what it reports.
func pythonStream(ctx context.Context, py string, s *service, sandboxID string, req client.ExecRequest, enc string, c *clientCount) error {
	root, err := filepath.Abs("../..")
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, py, "stream_client.py", sandboxID, req.Script, strconv.FormatInt(req.MaxOutputBytes, 10), enc)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "sdk", "python", "src"), "PYTHONDONTWRITEBYTECODE=1",
		"GENESIS_URL="+s.url, "GENESIS_API_KEY="+s.key)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s stream_client.py: %v\n%s", py, err, stderr.String())
	}
	var res struct {
		JobID       string  `json:"job_id"`
		StdoutBytes int64   `json:"stdout_bytes"`
		Events      int     `json:"events"`
		WallS       float64 `json:"wall_s"`
		CPUS        float64 `json:"cpu_s"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return fmt.Errorf("stream_client.py output %.200q: %v", out, err)
	}
	code := 0
	c.jobID, c.next, c.events = res.JobID, res.StdoutBytes, res.Events
	c.exit = &client.ExitEvent{JobID: res.JobID, ExitCode: &code, StdoutBytes: res.StdoutBytes}
	c.wall = time.Duration(res.WallS * float64(time.Second))
	c.cpu = time.Duration(res.CPUS * float64(time.Second))
	return nil
}

// recordStreamTargets records the rows of target 4: the live exec stream
// to the Go client in base64 and text, as MiB/s at the median, 90th and
// 99th percentile run time, against the baseline's median, with the
// service's CPU per MiB. cell answers a cell's run times and service CPU
// seconds per GiB (nil when it has none).
func recordStreamTargets(rt string, mib float64, cell func(build, path, enc string) ([]time.Duration, []float64)) {
	const path = "exec (live)"
	rate := func(d time.Duration) float64 { return mib / d.Seconds() }
	for _, enc := range []string{client.EncodingBase64, client.EncodingText} {
		walls, svc := cell("this", path, enc)
		s := Summarize(walls)
		r := TargetRow{Target: 4, Figure: "stdout → Go client, " + enc, Runtime: rt, Unit: "MiB/s", N: s.N}
		if s.N == 0 {
			continue
		}
		r.P50, r.P90, r.P99 = rate(s.P50), rate(s.P90), rate(s.P99)
		r.Verdict = VerdictOf(r.P50 >= 400)
		// s per GiB → ms per MiB: × 1000 / 1024.
		r.Note = fmt.Sprintf("p90/p99: the slower runs; service CPU %.2f ms/MiB", median(svc)*1000/1024)
		if bw, bsvc := cell("baseline", path, enc); len(bw) > 0 {
			r.Compare = []Compared{{baselineLabel(), rate(Summarize(bw).P50)}}
			r.Note += fmt.Sprintf(" (%s %.2f)", baselineLabel(), median(bsvc)*1000/1024)
		}
		recordTarget(r)
	}
}
