package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/sandbox"
)

const (
	// streamMemoryMB is the memory of the throughput benchmark's sandboxes:
	// the agent keeps a job's kept output in memory until the service has
	// recorded the job's exit.
	streamMemoryMB = 2048
	// jobTimeoutMS bounds the streaming benchmarks' jobs.
	jobTimeoutMS = 30 * 60 * 1000
	// sseBuffer is the read buffer of the benchmarks' SSE reader and of
	// their HTTP transport.
	sseBuffer = 1 << 20
)

// rawAPI calls the streaming endpoints over plain HTTP, reading the event
// streams with SSEReader; it shares nothing with the public client package.
type rawAPI struct {
	base, key string
	hc        *http.Client
}

func newRawAPI(tb testing.TB, s *service) *rawAPI {
	tr := &http.Transport{
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     time.Minute,
		ReadBufferSize:      sseBuffer,
		WriteBufferSize:     64 << 10,
		DisableCompression:  true,
	}
	tb.Cleanup(tr.CloseIdleConnections)
	return &rawAPI{base: s.url, key: s.key, hc: &http.Client{Transport: tr}}
}

// statusError is an answer other than the expected one.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

func (a *rawAPI) request(ctx context.Context, method, path string, body any, accept, lastEventID string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("Authorization", "Bearer "+a.key)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	return a.hc.Do(req)
}

// expect checks the status and media type of resp, closing it if they are
// not the expected ones.
func expect(resp *http.Response, code int, mediaType string) error {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode == code && mt == mediaType {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	detail := string(bytes.TrimSpace(b))
	var problem struct {
		Detail string `json:"detail"`
	}
	if mt == "application/problem+json" && json.Unmarshal(b, &problem) == nil && problem.Detail != "" {
		detail = problem.Detail
	}
	return &statusError{code: resp.StatusCode, msg: fmt.Sprintf("%s %s: %s (%s): %s",
		resp.Request.Method, resp.Request.URL.Path, resp.Status, mt, detail)}
}

// execStream posts an exec asking for its events as they happen.
func (a *rawAPI) execStream(ctx context.Context, sandboxID string, req client.ExecRequest, encoding string) (*http.Response, error) {
	resp, err := a.request(ctx, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(sandboxID)+"/exec"+encodingQuery("?", encoding), req, "text/event-stream", "")
	if err != nil {
		return nil, err
	}
	return resp, expect(resp, http.StatusOK, "text/event-stream")
}

// encodingQuery is the query parameter asking for an output encoding
// ("" for the default), after sep.
func encodingQuery(sep, encoding string) string {
	if encoding == "" {
		return ""
	}
	return sep + "encoding=" + url.QueryEscape(encoding)
}

// startJob starts a background job.
func (a *rawAPI) startJob(ctx context.Context, sandboxID string, req client.ExecRequest) (*client.Job, error) {
	req.Background = true
	resp, err := a.request(ctx, http.MethodPost, "/v1/sandboxes/"+url.PathEscape(sandboxID)+"/exec", req, "application/json", "")
	if err != nil {
		return nil, err
	}
	if err := expect(resp, http.StatusAccepted, "application/json"); err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var j client.Job
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil {
		return nil, fmt.Errorf("job of background exec: %w", err)
	}
	return &j, nil
}

// logs opens the event stream of a job's log after lastEventID ("" from
// the start).
func (a *rawAPI) logs(ctx context.Context, jobID, lastEventID string, follow bool, encoding string) (*http.Response, error) {
	path := "/v1/jobs/" + url.PathEscape(jobID) + "/logs?follow=" + strconv.FormatBool(follow) + encodingQuery("&", encoding)
	resp, err := a.request(ctx, http.MethodGet, path, nil, "text/event-stream", lastEventID)
	if err != nil {
		return nil, err
	}
	return resp, expect(resp, http.StatusOK, "text/event-stream")
}

// jobExit is the data of an exit event.
type jobExit struct {
	JobID           string `json:"job_id"`
	State           string `json:"state"`
	ExitCode        *int   `json:"exit_code"`
	ExitReason      string `json:"exit_reason"`
	Error           string `json:"error"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	StderrBytes     int64  `json:"stderr_bytes"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	DurationMS      int64  `json:"duration_ms"`
}

// tally reads one job's event stream to its end and checks it: the output
// of each stream continues without gap or overlap from where it starts,
// and the stream ends with the exit event. It notes when events arrived.
type tally struct {
	keep bool   // keep stdout's bytes in out
	out  []byte // stdout, if keep
	// each, if set, sees every event after it is counted.
	each func(SSEEvent)

	events   int
	bytes    [2]int64 // decoded payload of stdout and stderr
	seen     [2]bool
	next     [2]int64
	firstAt  time.Time // first event of any type
	firstID  string
	jobAt    time.Time
	firstOut time.Time
	exitAt   time.Time
	jobID    string
	trunc    []string
	exit     jobExit
	buf      []byte
}

func (t *tally) read(body io.Reader) error {
	r := NewSSEReader(body, sseBuffer)
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			if t.exitAt.IsZero() {
				return fmt.Errorf("the event stream ended after %d events without an exit event", t.events)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("event stream, after %d events: %w", t.events, err)
		}
		now := time.Now()
		if !t.exitAt.IsZero() {
			return fmt.Errorf("event %q (id %s) after the exit event", ev.Name, ev.ID)
		}
		t.events++
		if t.firstAt.IsZero() {
			t.firstAt, t.firstID = now, ev.ID
		}
		switch ev.Name {
		case "job":
			var j client.Job
			if err := json.Unmarshal(ev.Data, &j); err != nil {
				return fmt.Errorf("job event: %w", err)
			}
			t.jobAt, t.jobID = now, j.ID
		case "stdout", "stderr":
			s := 0
			if ev.Name == "stderr" {
				s = 1
			}
			off, p, err := DecodeOutput(ev.Data, t.buf)
			if err != nil {
				return fmt.Errorf("event %s: %w", ev.ID, err)
			}
			t.buf = p
			if t.seen[s] && off != t.next[s] {
				return fmt.Errorf("%s event %s at offset %d, want %d", ev.Name, ev.ID, off, t.next[s])
			}
			t.seen[s], t.next[s] = true, off+int64(len(p))
			t.bytes[s] += int64(len(p))
			if t.firstOut.IsZero() {
				t.firstOut = now
			}
			if t.keep && s == 0 {
				t.out = append(t.out, p...)
			}
		case "truncated":
			t.trunc = append(t.trunc, string(ev.Data))
		case "exit":
			if err := json.Unmarshal(ev.Data, &t.exit); err != nil {
				return fmt.Errorf("exit event: %w", err)
			}
			t.exitAt = now
		default:
			return fmt.Errorf("unexpected event %q (id %s)", ev.Name, ev.ID)
		}
		if t.each != nil {
			t.each(ev)
		}
	}
}

// readStream reads resp's event stream with t and closes it.
func (t *tally) readStream(resp *http.Response) error {
	defer resp.Body.Close()
	return t.read(resp.Body)
}

// succeeded checks that the job exited 0 with nothing truncated and that
// the events carried as many bytes as the exit event counts.
func (t *tally) succeeded() error {
	x := t.exit
	switch {
	case x.ExitCode == nil || *x.ExitCode != 0 || x.State != string(sandbox.JobSucceeded):
		return fmt.Errorf("job %s ended %s (%s, code %v): %s", x.JobID, x.State, x.ExitReason, x.ExitCode, x.Error)
	case len(t.trunc) > 0 || x.StdoutTruncated || x.StderrTruncated:
		return fmt.Errorf("job %s: output truncated: %q", x.JobID, t.trunc)
	case t.next[0] != x.StdoutBytes || t.next[1] != x.StderrBytes:
		return fmt.Errorf("job %s: events end at stdout %d, stderr %d; the exit event counts %d, %d",
			x.JobID, t.next[0], t.next[1], x.StdoutBytes, x.StderrBytes)
	}
	return nil
}

func (t *tally) decoded() int64 { return t.bytes[0] + t.bytes[1] }

// createWith creates a sandbox of the profile with resources and tracks it.
func (s *service) createWith(ctx context.Context, runtime string, res *client.Resources) (*client.Sandbox, error) {
	sb, err := s.client.CreateSandbox(ctx, client.CreateSandboxRequest{
		Profile:   profile,
		Runtime:   runtime,
		Resources: res,
		Metadata:  map[string]string{"purpose": "bench"},
	}, "")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.live[sb.ID] = true
	s.mu.Unlock()
	return sb, nil
}

// waitFinal polls a job until the service has recorded its final state and
// returns when it saw it.
func (s *service) waitFinal(ctx context.Context, jobID string) (time.Time, error) {
	for {
		j, err := s.client.GetJob(ctx, jobID)
		if err != nil {
			return time.Time{}, err
		}
		if sandbox.JobState(j.State).Final() {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("job %s still %s: %w", jobID, j.State, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// cpuTimes are CPU times consumed so far by the benchmark process (the SSE
// client), the service, and the sandbox's cgroup (agent, job and shim under
// runc; Sentry, gofer and everything inside under runsc).
type cpuTimes struct {
	client, service, sandbox, throttled time.Duration
	sandboxOK                           bool
}

func (c cpuTimes) sub(o cpuTimes) cpuTimes {
	return cpuTimes{c.client - o.client, c.service - o.service, c.sandbox - o.sandbox, c.throttled - o.throttled, c.sandboxOK && o.sandboxOK}
}

func (s *service) cpu(cg *cgroupCPU) (cpuTimes, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuTimes{}, err
	}
	c := cpuTimes{client: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	var err error
	if c.service, err = processCPU(s.cmd.Process.Pid); err != nil {
		return c, err
	}
	if cg != nil {
		if c.sandbox, c.throttled, err = cg.read(); err == nil {
			c.sandboxOK = true
		}
	}
	return c, nil
}

// processCPU is the user plus system time of a process, all its threads.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(string(b[i+1:])) // from field 3 (state) on
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	var ticks int64
	for _, v := range f[11:13] { // utime, stime
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %v", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil // USER_HZ is 100 on Linux
}

// cgroupCPU reads the CPU usage and throttling of one cgroup, v1 or v2.
type cgroupCPU struct {
	usage string // v1: cpuacct.usage (ns); v2: cpu.stat
	stat  string // cpu.stat
	v2    bool
}

// cgroupOf finds the cgroup of a host process.
func cgroupOf(pid int) (*cgroupCPU, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return nil, err
	}
	var v1acct, v1cpu, v2 string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			switch c {
			case "cpuacct":
				v1acct = parts[2]
			case "cpu":
				v1cpu = parts[2]
			}
		}
		if parts[0] == "0" && parts[1] == "" {
			v2 = parts[2]
		}
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	if v1acct != "" {
		for _, m := range []string{"cpuacct", "cpu,cpuacct", "cpuacct,cpu"} {
			u := filepath.Join("/sys/fs/cgroup", m, v1acct, "cpuacct.usage")
			if !exists(u) {
				continue
			}
			cg := &cgroupCPU{usage: u}
			for _, m := range []string{"cpu", "cpu,cpuacct", "cpuacct,cpu"} {
				if st := filepath.Join("/sys/fs/cgroup", m, v1cpu, "cpu.stat"); v1cpu != "" && exists(st) {
					cg.stat = st
					break
				}
			}
			return cg, nil
		}
	}
	if st := filepath.Join("/sys/fs/cgroup", v2, "cpu.stat"); v2 != "" && exists(st) {
		return &cgroupCPU{usage: st, stat: st, v2: true}, nil
	}
	return nil, fmt.Errorf("no readable CPU accounting for the cgroup of pid %d", pid)
}

func (c *cgroupCPU) read() (usage, throttled time.Duration, err error) {
	stat := map[string]int64{}
	if c.stat != "" {
		b, err := os.ReadFile(c.stat)
		if err != nil {
			return 0, 0, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, " "); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				stat[k] = n
			}
		}
	}
	if c.v2 {
		return time.Duration(stat["usage_usec"]) * time.Microsecond, time.Duration(stat["throttled_usec"]) * time.Microsecond, nil
	}
	b, err := os.ReadFile(c.usage)
	if err != nil {
		return 0, 0, err
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %v", c.usage, err)
	}
	return time.Duration(ns), time.Duration(stat["throttled_time"]), nil
}

// sandboxCgroup returns the CPU accounting of a sandbox's container, or an
// error saying why it cannot be read.
func sandboxCgroup(ctx context.Context, sandboxID string) (*cgroupCPU, error) {
	container, err := containerOf(ctx, sandboxID)
	if err != nil {
		return nil, err
	}
	pid, err := hostPID(ctx, container)
	if err != nil {
		return nil, err
	}
	return cgroupOf(pid)
}

// bulkJob returns the request of a job writing total bytes of log lines that
// the service keeps all of: on stdout alone when the service accepts a cap
// that large for one stream, else half on stdout and then half on stderr.
// (The agent caps each stream of a background job at 256 MiB.) The lines
// are written to a file in the workspace first, outside any measurement,
// and the job is a cat of it: what is measured is the way of the output,
// not the program making it (a `yes | head` pipeline alone takes a good
// part of the sandbox's one CPU). It also says which it chose and why.
func bulkJob(ctx context.Context, s *service, api *rawAPI, sandboxID string, total int64) (client.ExecRequest, string, error) {
	_, err := api.startJob(ctx, sandboxID, client.ExecRequest{Command: []string{"true"}, MaxOutputBytes: total, TimeoutMS: jobTimeoutMS})
	var se *statusError
	per, script, how := total, "cat "+benchFile, fmt.Sprintf("cat of %d bytes of %d-byte log lines on stdout, max_output_bytes %d", total, len(benchLine)+1, total)
	switch {
	case err == nil:
	case errors.As(err, &se) && se.code == http.StatusBadRequest:
		per = total / 2
		script = "cat " + benchFile + " && cat " + benchFile + " >&2"
		how = fmt.Sprintf("cat of %d bytes of log lines, then the same on stderr, max_output_bytes %d: a %d-byte cap on one stream is refused: %s",
			per, per, total, se.msg)
	default:
		return client.ExecRequest{}, "", fmt.Errorf("probing a %d-byte output cap: %w", total, err)
	}
	res, err := s.client.Exec(ctx, sandboxID, client.ExecRequest{
		Script: "yes '" + benchLine + "' | head -c " + strconv.FormatInt(per, 10) + " > " + benchFile, TimeoutMS: jobTimeoutMS,
	})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("exit %d: %s", res.ExitCode, res.Stderr)
	}
	if err != nil {
		return client.ExecRequest{}, "", fmt.Errorf("writing the output file: %w", err)
	}
	return client.ExecRequest{Script: script, MaxOutputBytes: per, TimeoutMS: jobTimeoutMS}, how, nil
}

// benchLine is the line the throughput job's output repeats: an ordinary
// log line, the kind of output a job streams (a stream of zeros would
// flatter the text encoding, whose cost grows with the number of lines).
const benchLine = "2026-11-30T10:00:00.000Z INFO worker=7 GET /api/v1/items?page=2 status=200 bytes=5120 took=3.2ms"

// benchFile holds the throughput job's output in the sandbox.
const benchFile = "/workspace/stream-bench.txt"

// BenchmarkStreamThroughput measures, per runtime, how fast a job's output
// reaches an SSE client: a job writing GENESIS_BENCH_STREAM_MIB (default
// 512) MiB of log lines (benchLine), read live through POST exec with Accept:
// text/event-stream, then again live through GET /v1/jobs/{id}/logs after a
// background start, and that second job's finished log read back from the
// start; each path once with the default base64 encoding and once with
// ?encoding=text (rows suffixed -text). MiB/s is decoded payload over the
// time from sending the request to the exit event; CPU times show who did
// the work.
func BenchmarkStreamThroughput(b *testing.B) {
	s := startService(b)
	api := newRawAPI(b, s)
	total := int64(envInt(b, "GENESIS_BENCH_STREAM_MIB", 512)) << 20
	tbl := NewTable("runtime", "path", "MiB", "events", "wall s", "MiB/s", "1st byte ms", "job ran s", "final +ms",
		"CPU s: client", "service", "sandbox", "throttled")
	var job string
	s.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
		defer cancel()
		sb, err := s.createWith(ctx, rt, &client.Resources{MemoryMB: streamMemoryMB})
		if err != nil {
			b.Fatalf("create (%s): %v", rt, err)
		}
		defer func() {
			if err := s.remove(ctx, sb.ID); err != nil {
				b.Error(err)
			}
		}()
		cg, err := sandboxCgroup(ctx, sb.ID)
		if err != nil {
			fmt.Printf("stream throughput (%s): sandbox CPU not shown: %v\n", rt, err)
		}
		if _, err := s.client.Exec(ctx, sb.ID, client.ExecRequest{Command: []string{"true"}}); err != nil {
			b.Fatalf("warm-up exec (%s): %v", rt, err)
		}
		req, how, err := bulkJob(ctx, s, api, sb.ID, total)
		if err != nil {
			b.Fatal(err)
		}
		job = how

		// measure runs one path: open returns the event stream; the clock
		// starts before open and stops at the exit event.
		measure := func(name string, check bool, open func() (*http.Response, error)) string {
			t := &tally{}
			c0, err := s.cpu(cg)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			resp, err := open()
			if err == nil {
				err = t.readStream(resp)
			}
			if err == nil && check {
				err = t.succeeded()
			}
			if err == nil && t.decoded() != total {
				err = fmt.Errorf("decoded %d bytes, want %d", t.decoded(), total)
			}
			if err != nil {
				b.Fatalf("%s (%s): %v", name, rt, err)
			}
			// The service records the final state after the exit event is
			// in the log; waiting for it keeps its work out of the next run.
			var final string
			if check {
				at, err := s.waitFinal(ctx, t.exit.JobID)
				if err != nil {
					b.Fatal(err)
				}
				final = strconv.FormatInt(at.Sub(t.exitAt).Milliseconds(), 10)
			}
			c1, err := s.cpu(cg)
			if err != nil {
				b.Fatal(err)
			}
			c := c1.sub(c0)
			wall := t.exitAt.Sub(start)
			rate := float64(t.decoded()) / (1 << 20) / wall.Seconds()
			b.ReportMetric(rate, name+"-MiB/s")
			sbCPU, thr := "n/a", "n/a"
			if c.sandboxOK {
				sbCPU, thr = fmt.Sprintf("%.2f", c.sandbox.Seconds()), fmt.Sprintf("%.2f", c.throttled.Seconds())
			}
			ran := ""
			if check {
				ran = fmt.Sprintf("%.2f", float64(t.exit.DurationMS)/1000)
			}
			tbl.Row(rt, name, strconv.FormatInt(t.decoded()>>20, 10), strconv.Itoa(t.events),
				fmt.Sprintf("%.2f", wall.Seconds()), fmt.Sprintf("%.0f", rate), FormatMs(t.firstOut.Sub(start)), ran, final,
				fmt.Sprintf("%.2f", c.client.Seconds()), fmt.Sprintf("%.2f", c.service.Seconds()), sbCPU, thr)
			return t.exit.JobID
		}
		b.ReportMetric(0, "ns/op")
		for _, enc := range []string{"", "text"} {
			suffix := ""
			if enc != "" {
				suffix = "-" + enc
			}
			measure("exec-sse"+suffix, true, func() (*http.Response, error) { return api.execStream(ctx, sb.ID, req, enc) })
			jobID := measure("follow"+suffix, true, func() (*http.Response, error) {
				j, err := api.startJob(ctx, sb.ID, req)
				if err != nil {
					return nil, err
				}
				return api.logs(ctx, j.ID, "", true, enc)
			})
			measure("replay"+suffix, false, func() (*http.Response, error) { return api.logs(ctx, jobID, "", false, enc) })
		}
	})
	printTable(fmt.Sprintf("job output → SSE client, decoded payload (%s)", profile), tbl)
	fmt.Printf("job: %s; sandboxes: %d MiB, the profile's CPUs.\n"+
		"exec-sse: POST exec, Accept: text/event-stream; follow: background start, then GET …/logs?follow=true;\n"+
		"replay: GET …/logs?follow=false of the finished follow job; -text: the same with ?encoding=text. wall: request sent → exit event; final +ms: exit\n"+
		"event → job record final; CPU: this process (client), the service, the sandbox's cgroup.\n", job, streamMemoryMB)
}

// BenchmarkStreamTTFB measures, per runtime, the time from sending POST
// exec of `echo hi` with Accept: text/event-stream to receiving its stdout
// event, sequentially on one warm sandbox (GENESIS_BENCH_TTFB_ITERS,
// default 300), with a synchronous exec of the same command as a
// reference.
func BenchmarkStreamTTFB(b *testing.B) {
	s := startService(b)
	api := newRawAPI(b, s)
	iters := envInt(b, "GENESIS_BENCH_TTFB_ITERS", 300)
	const warmup, syncIters = 10, 50
	tbl := NewTable("runtime", "n", "p50 ms", "p99 ms", "mean ms", "min ms", "max ms", "job event p50", "exit event p50", "agent job p50", "sync exec p50")
	s.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		sb, err := s.create(ctx, rt)
		if err != nil {
			b.Fatalf("create (%s): %v", rt, err)
		}
		defer func() {
			if err := s.remove(ctx, sb.ID); err != nil {
				b.Error(err)
			}
		}()
		req := client.ExecRequest{Command: []string{"echo", "hi"}}
		one := func() (*tally, time.Time, error) {
			t := &tally{keep: true}
			t0 := time.Now()
			resp, err := api.execStream(ctx, sb.ID, req, "")
			if err != nil {
				return nil, t0, err
			}
			if err := t.readStream(resp); err != nil {
				return nil, t0, err
			}
			if err := t.succeeded(); err != nil {
				return nil, t0, err
			}
			if string(t.out) != "hi\n" || t.jobAt.IsZero() {
				return nil, t0, fmt.Errorf("stdout %q, job event at %v", t.out, t.jobAt)
			}
			return t, t0, nil
		}
		for range warmup {
			if _, _, err := one(); err != nil {
				b.Fatalf("warm-up (%s): %v", rt, err)
			}
		}
		var ttfb, jobEv, exitEv, agentJob []time.Duration
		for range iters {
			t, t0, err := one()
			if err != nil {
				b.Fatalf("streamed exec (%s): %v", rt, err)
			}
			ttfb = append(ttfb, t.firstOut.Sub(t0))
			jobEv = append(jobEv, t.jobAt.Sub(t0))
			exitEv = append(exitEv, t.exitAt.Sub(t0))
			agentJob = append(agentJob, time.Duration(t.exit.DurationMS)*time.Millisecond)
		}
		var syncs []time.Duration
		for range syncIters {
			t0 := time.Now()
			res, err := s.client.Exec(ctx, sb.ID, req)
			if err != nil || res.Stdout != "hi\n" {
				b.Fatalf("sync exec (%s): %v (%+v)", rt, err, res)
			}
			syncs = append(syncs, time.Since(t0))
		}
		sum := Summarize(ttfb)
		reportSummary(b, "", sum)
		b.ReportMetric(Ms(Summarize(jobEv).P50), "job-event-p50-ms")
		b.ReportMetric(Ms(Summarize(exitEv).P50), "exit-event-p50-ms")
		b.ReportMetric(Ms(Summarize(syncs).P50), "sync-exec-p50-ms")
		tbl.Row(rt, strconv.Itoa(sum.N), FormatMs(sum.P50), FormatMs(sum.P99), FormatMs(sum.Mean), FormatMs(sum.Min), FormatMs(sum.Max),
			FormatMs(Summarize(jobEv).P50), FormatMs(Summarize(exitEv).P50), FormatMs(Summarize(agentJob).P50), fmt.Sprintf("%s (n=%d)", FormatMs(Summarize(syncs).P50), syncIters))
	})
	printTable(fmt.Sprintf("streamed exec `echo hi`: request sent → stdout event, ms, sequential after %d warm-ups", warmup), tbl)
	fmt.Println("job event: the first event (sent once the job runs); agent job: the exit event's duration_ms (the agent's\n" +
		"start of the job → its shim's exit, whole ms); sync exec: the same command without streaming, through the client.")
}

// BenchmarkStreamResume measures, per runtime, the time from opening GET
// /v1/jobs/{id}/logs of a finished job with Last-Event-ID set to a cursor
// in the middle of its log until the first event arrives
// (GENESIS_BENCH_RESUME_ITERS, default 200, on a warm connection; the rest
// of the log is read each time). Two logs: 4 MiB written at once (large
// events) and many short lines alternating between stdout and stderr
// (small events). The first open of each finished log is reported apart.
func BenchmarkStreamResume(b *testing.B) {
	s := startService(b)
	api := newRawAPI(b, s)
	iters := envInt(b, "GENESIS_BENCH_RESUME_ITERS", 200)
	const warmup = 5
	tbl := NewTable("runtime", "log", "log MiB", "events", "cursor", "n", "p50 ms", "p99 ms", "mean ms", "min ms", "max ms", "first open ms", "early p50", "early p99", "rest of log p50")
	logs := []struct {
		name string
		req  client.ExecRequest
	}{
		{"4 MiB at once", client.ExecRequest{Command: []string{"head", "-c", "4194304", "/dev/zero"},
			MaxOutputBytes: 8 << 20, TimeoutMS: jobTimeoutMS}},
		{"50k+50k lines", client.ExecRequest{
			Script:         `i=0; while [ $i -lt 50000 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done`,
			MaxOutputBytes: 64 << 20, TimeoutMS: jobTimeoutMS}},
	}
	s.eachRuntime(b, func(b *testing.B, rt string) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		sb, err := s.create(ctx, rt)
		if err != nil {
			b.Fatalf("create (%s): %v", rt, err)
		}
		defer func() {
			if err := s.remove(ctx, sb.ID); err != nil {
				b.Error(err)
			}
		}()
		b.ReportMetric(0, "ns/op")
		for li, lg := range logs {
			// Run the job and list its event ids.
			var ids []string
			t := &tally{each: func(ev SSEEvent) { ids = append(ids, ev.ID) }}
			resp, err := api.execStream(ctx, sb.ID, lg.req, "")
			if err == nil {
				err = t.readStream(resp)
			}
			if err == nil {
				err = t.succeeded()
			}
			if err != nil {
				b.Fatalf("job %q (%s): %v", lg.name, rt, err)
			}
			if _, err := s.waitFinal(ctx, t.exit.JobID); err != nil {
				b.Fatal(err)
			}
			size, _ := strconv.ParseInt(ids[len(ids)-1], 10, 64) // the exit event's cursor: the log's end
			// The cursor: the first event id past the middle of the log; the
			// event after it is the one a resume must start with.
			mid := len(ids) - 2
			for i, id := range ids[1 : len(ids)-1] { // not the job event nor the exit event
				if n, _ := strconv.ParseInt(id, 10, 64); n >= size/2 {
					mid = i + 1
					break
				}
			}
			jobID := t.exit.JobID
			// resume reads the log after the event ids[at] and checks that
			// it starts with the next event and holds all that follow.
			resume := func(at int) (first, rest time.Duration, err error) {
				t := &tally{}
				t0 := time.Now()
				resp, err := api.logs(ctx, jobID, ids[at], true, "")
				if err != nil {
					return 0, 0, err
				}
				if err := t.readStream(resp); err != nil {
					return 0, 0, err
				}
				if t.firstID != ids[at+1] || t.events != len(ids)-at-1 {
					return 0, 0, fmt.Errorf("resume after %s: first event %s, %d events; want %s, %d",
						ids[at], t.firstID, t.events, ids[at+1], len(ids)-at-1)
				}
				return t.firstAt.Sub(t0), t.exitAt.Sub(t.firstAt), nil
			}
			// Each iteration resumes from the middle, then, as a reference,
			// from the first output event: what differs is the work that
			// grows with the position of the cursor.
			var samples, rests, early []time.Duration
			var cold time.Duration
			for i := range warmup + iters {
				first, rest, err := resume(mid)
				if err != nil {
					b.Fatalf("%q (%s): %v", lg.name, rt, err)
				}
				switch {
				case i == 0:
					cold = first
				case i >= warmup:
					samples = append(samples, first)
					rests = append(rests, rest)
					e, _, err := resume(1)
					if err != nil {
						b.Fatalf("%q (%s): %v", lg.name, rt, err)
					}
					early = append(early, e)
				}
			}
			sum := Summarize(samples)
			prefix := fmt.Sprintf("log%d-", li+1)
			b.ReportMetric(Ms(sum.P50), prefix+"p50-ms")
			b.ReportMetric(Ms(sum.P99), prefix+"p99-ms")
			b.ReportMetric(Ms(cold), prefix+"first-open-ms")
			b.ReportMetric(Ms(Summarize(early).P50), prefix+"early-p50-ms")
			tbl.Row(rt, lg.name, fmt.Sprintf("%.1f", float64(size)/(1<<20)), strconv.Itoa(len(ids)), ids[mid], strconv.Itoa(sum.N),
				FormatMs(sum.P50), FormatMs(sum.P99), FormatMs(sum.Mean), FormatMs(sum.Min), FormatMs(sum.Max),
				FormatMs(cold), FormatMs(Summarize(early).P50), FormatMs(Summarize(early).P99), FormatMs(Summarize(rests).P50))
		}
	})
	printTable(fmt.Sprintf("resume a finished job's log from a middle cursor: GET sent → first event, ms, after %d warm-ups", warmup), tbl)
	fmt.Println("first open: the first GET after the job finished (the service reopens the log file); early: the same\n" +
		"resume from the first output event's id instead (taken after each middle one); rest of log: middle resume's first → exit event.")
}
