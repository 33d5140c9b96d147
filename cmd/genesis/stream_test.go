package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
)

// sseEv is one event of a fake job log; id is the cursor after it.
type sseEv struct {
	id   int64
	name string
	data string
}

// jobLog builds the events of a job writing out and errOut in small chunks,
// interleaved, and ending with exit.
func jobLog(out, errOut []byte, exit client.ExitEvent) []sseEv {
	var evs []sseEv
	var cursor int64
	add := func(name string, v any) {
		b, _ := json.Marshal(v)
		cursor += 8 + int64(len(b))
		evs = append(evs, sseEv{cursor, name, string(b)})
	}
	for o, e := 0, 0; o < len(out) || e < len(errOut); {
		if o < len(out) {
			n := min(7, len(out)-o)
			add("stdout", map[string]any{"offset": o, "data": base64.StdEncoding.EncodeToString(out[o : o+n])})
			o += n
		}
		if e < len(errOut) {
			n := min(5, len(errOut)-e)
			add("stderr", map[string]any{"offset": e, "data": base64.StdEncoding.EncodeToString(errOut[e : e+n])})
			e += n
		}
	}
	exit.JobID = "job-1"
	exit.StdoutBytes, exit.StderrBytes = int64(len(out)), int64(len(errOut))
	add("exit", exit)
	return evs
}

// sseAPI serves a streamed exec and the log of job-1, dropping the
// connection where drops says (drops[k]: after that many events of
// connection k, in the middle of the next one).
type sseAPI struct {
	t      *testing.T
	events []sseEv
	drops  []int
	// onEvent runs after each event written, with the connection number
	// and the event's index.
	onEvent func(conn, i int)

	mu     sync.Mutex
	conns  int
	resume []string // Last-Event-ID or ?cursor= of each log request
	cancel int      // cancel requests seen
}

func (s *sseAPI) handle(w http.ResponseWriter, r *http.Request, body []byte) {
	s.mu.Lock()
	k := s.conns
	s.conns++
	s.mu.Unlock()
	var start int64
	switch {
	case r.Method == "POST" && r.URL.Path == "/v1/jobs/job-1/cancel":
		s.mu.Lock()
		s.cancel++
		s.mu.Unlock()
		reply(202, `{"id":"job-1","sandbox_id":"sb-1","state":"running","mode":"background"}`)(w, r, body)
		return
	case r.Method == "POST" && r.URL.Path == "/v1/sandboxes/sb-1/exec":
		if r.Header.Get("Accept") != "text/event-stream" {
			s.t.Errorf("exec Accept %q", r.Header.Get("Accept"))
		}
	case r.Method == "GET" && r.URL.Path == "/v1/jobs/job-1/logs":
		c := r.Header.Get("Last-Event-ID")
		if q := r.URL.Query().Get("cursor"); q != "" {
			c = q
		}
		s.mu.Lock()
		s.resume = append(s.resume, c)
		s.mu.Unlock()
		if c != "" {
			n, err := strconv.ParseInt(c, 10, 64)
			if err != nil {
				problem(400, "invalid_cursor", "bad cursor")(w, r, body)
				return
			}
			start = n
		}
	default:
		problem(404, "not_found", r.URL.Path)(w, r, body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	rc := http.NewResponseController(w)
	if r.Method == "POST" {
		fmt.Fprintf(w, "id: 0\nevent: job\ndata: {\"id\":\"job-1\",\"sandbox_id\":\"sb-1\",\"state\":\"running\",\"mode\":\"background\"}\n\n")
	}
	sent := 0
	for i, ev := range s.events {
		if ev.id <= start {
			continue
		}
		frame := fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", ev.id, ev.name, ev.data)
		if k < len(s.drops) && s.drops[k] == sent {
			_, _ = io.WriteString(w, frame[:len(frame)/2])
			_ = rc.Flush()
			panic(http.ErrAbortHandler)
		}
		_, _ = io.WriteString(w, frame+": keepalive\n\n")
		_ = rc.Flush()
		sent++
		if s.onEvent != nil {
			s.onEvent(k, i)
		}
	}
}

// cliCtx is cli with a caller's context (for interrupts) and stdout.
func cliCtx(t *testing.T, ctx context.Context, url string, stdout io.Writer, args ...string) result {
	t.Helper()
	var errb bytes.Buffer
	a := &app{
		stdin:  strings.NewReader(""),
		stdout: stdout,
		stderr: &errb,
		getenv: func(k string) string { return map[string]string{client.EnvURL: url, client.EnvAPIKey: "k"}[k] },
		now:    testNow,
	}
	code := run(ctx, args, a)
	return result{"", errb.String(), code}
}

// interruptAfter is a stdout that calls interrupt once it holds n bytes.
type interruptAfter struct {
	bytes.Buffer
	n         int
	interrupt func()
}

func (w *interruptAfter) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	if w.Len() >= w.n {
		w.interrupt()
	}
	return n, err
}

func intp(i int) *int { return &i }

func TestExecStream(t *testing.T) {
	t.Parallel()
	out := []byte("line 1\n\xff\xfe binary \x00 bytes\nand the end without newline")
	errOut := []byte("warn: \xc3 half a rune\n")
	tests := []struct {
		name     string
		exit     client.ExitEvent
		drops    []int
		args     []string
		wantCode int
		wantNote string
	}{
		{name: "exit code", exit: client.ExitEvent{State: "failed", ExitCode: intp(3), ExitReason: "exited"}, wantCode: 3},
		{name: "drops are resumed", exit: client.ExitEvent{State: "succeeded", ExitCode: intp(0), ExitReason: "exited"}, drops: []int{3, 0, 4}},
		{
			name: "timeout", args: []string{"--timeout", "2s"}, drops: []int{5},
			exit:     client.ExitEvent{State: "failed", ExitCode: intp(137), ExitReason: "timeout", StdoutTruncated: true},
			wantCode: 124, wantNote: fmt.Sprintf("genesis: stdout truncated: %d bytes produced, the rest was dropped\ngenesis: job timed out after 2s\n", len(out)),
		},
		{
			name: "lost", exit: client.ExitEvent{State: "lost", ExitReason: "lost", Error: "the sandbox went away"},
			wantCode: 1, wantNote: "genesis: job lost: the sandbox went away\n",
		},
		{
			name: "signal", exit: client.ExitEvent{State: "failed", ExitCode: intp(-1), ExitReason: "signal", Signal: "SIGKILL"},
			wantCode: 137, wantNote: "genesis: job killed by signal SIGKILL\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &sseAPI{t: t, events: jobLog(out, errOut, tc.exit), drops: tc.drops}
			api := newFakeAPI(t, s.handle)
			args := append([]string{"exec", "--stream"}, tc.args...)
			r := cli(t, api.URL, "", nil, append(args, "sb-1", "--", "gen")...)
			if r.code != tc.wantCode {
				t.Errorf("exit %d, want %d (stderr %q)", r.code, tc.wantCode, r.stderr)
			}
			if r.stdout != string(out) {
				t.Errorf("stdout = %q, want %q", r.stdout, out)
			}
			if r.stderr != string(errOut)+tc.wantNote {
				t.Errorf("stderr = %q, want %q", r.stderr, string(errOut)+tc.wantNote)
			}
			reqs := api.requests()
			if len(reqs) != len(tc.drops)+1 {
				t.Fatalf("%d requests, want %d", len(reqs), len(tc.drops)+1)
			}
			wantBody := `{"command":["gen"]}`
			if tc.args != nil {
				wantBody = `{"command":["gen"],"timeout_ms":2000}`
			}
			jsonEqual(t, reqs[0].Body, wantBody)
			// Each resume starts after the last event received whole.
			s.mu.Lock()
			defer s.mu.Unlock()
			pos, last := 0, "0"
			for i, d := range tc.drops {
				pos += d
				if pos > 0 {
					last = strconv.FormatInt(s.events[pos-1].id, 10)
				}
				if s.resume[i] != last {
					t.Errorf("resume %d at %q, want %q", i, s.resume[i], last)
				}
			}
		})
	}
}

func TestExecStreamJSON(t *testing.T) {
	t.Parallel()
	s := &sseAPI{t: t, events: jobLog([]byte("hi"), nil, client.ExitEvent{State: "failed", ExitCode: intp(2), ExitReason: "exited"}), drops: []int{1}}
	api := newFakeAPI(t, s.handle)
	r := cli(t, api.URL, "", nil, "-o", "json", "exec", "--stream", "sb-1", "--", "x")
	if r.code != 2 {
		t.Errorf("exit %d, want 2: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("stdout %q, want 3 JSON lines", r.stdout)
	}
	var evs []client.LogEvent
	for _, l := range lines {
		var ev client.LogEvent
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		evs = append(evs, ev)
	}
	if evs[0].Event != "job" || evs[0].Job.ID != "job-1" || evs[1].Event != "stdout" || string(evs[1].Data) != "hi" ||
		evs[2].Exit == nil || *evs[2].Exit.ExitCode != 2 || evs[2].ID != strconv.FormatInt(s.events[1].id, 10) {
		t.Errorf("events %+v", evs)
	}
}

func TestExecStreamInterruptCancelsJob(t *testing.T) {
	t.Parallel()
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	s := &sseAPI{t: t, events: jobLog([]byte("0123456789abcdefghij"), nil, client.ExitEvent{ExitCode: intp(0), ExitReason: "exited"})}
	block := make(chan struct{})
	defer close(block)
	s.onEvent = func(conn, i int) {
		if i == 1 {
			<-block // the job goes on, silent
		}
	}
	api := newFakeAPI(t, s.handle)
	stdout := &interruptAfter{n: 14, interrupt: interrupt} // Ctrl-C once output arrived
	r := cliCtx(t, ctx, api.URL, stdout, "exec", "--stream", "sb-1", "--", "x")
	if r.code != 130 {
		t.Errorf("exit %d, want 130 (stderr %q)", r.code, r.stderr)
	}
	if stdout.String() != "0123456789abcd" {
		t.Errorf("stdout %q, want what arrived before the interrupt", stdout.String())
	}
	if !strings.Contains(r.stderr, "interrupted; canceled job job-1") {
		t.Errorf("stderr %q", r.stderr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != 1 {
		t.Errorf("%d cancel requests, want 1", s.cancel)
	}
}

func TestExecBackground(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, reply(202, `{"id":"job-7","sandbox_id":"sb-1","state":"running","mode":"background","created_at":"2026-03-01T12:00:00Z"}`))
	r := cli(t, api.URL, "", nil, "exec", "--background", "--timeout", "1m", "sb-1", "--script", "sleep 30")
	if r.code != 0 || r.stdout != "job-7\n" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	req := api.only(t)
	if req.Method != "POST" || req.Path != "/v1/sandboxes/sb-1/exec" {
		t.Errorf("request %s %s", req.Method, req.Path)
	}
	jsonEqual(t, req.Body, `{"script":"sleep 30","timeout_ms":60000,"background":true}`)

	r = cli(t, api.URL, "", nil, "-o", "json", "exec", "--background", "sb-1", "--", "true")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var j client.Job
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil || j.ID != "job-7" || j.Mode != "background" {
		t.Errorf("json %q: %v", r.stdout, err)
	}
}

func TestLogs(t *testing.T) {
	t.Parallel()
	out, errOut := []byte("all the output of the job\n"), []byte("oops\nmore trouble\n")
	exit := client.ExitEvent{State: "failed", ExitCode: intp(5), ExitReason: "exited"}

	t.Run("snapshot", func(t *testing.T) {
		t.Parallel()
		s := &sseAPI{t: t, events: jobLog(out, errOut, exit)}
		api := newFakeAPI(t, s.handle)
		r := cli(t, api.URL, "", nil, "logs", "job-1")
		if r.code != 0 || r.stdout != string(out) || r.stderr != string(errOut) {
			t.Errorf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
		}
		req := api.only(t)
		if req.Path != "/v1/jobs/job-1/logs" || req.Query["follow"][0] != "false" || req.Query["cursor"] != nil {
			t.Errorf("request %s %v", req.Path, req.Query)
		}
	})
	t.Run("follow from a cursor with drops", func(t *testing.T) {
		t.Parallel()
		s := &sseAPI{t: t, events: jobLog(out, errOut, exit), drops: []int{1, 0, 2}}
		api := newFakeAPI(t, s.handle)
		cursor := strconv.FormatInt(s.events[1].id, 10)
		r := cli(t, api.URL, "", nil, "logs", "-f", "--cursor", cursor, "job-1")
		if r.code != 5 {
			t.Errorf("exit %d, want the job's 5 (stderr %q)", r.code, r.stderr)
		}
		if r.stdout != string(out[7:]) || r.stderr != string(errOut[5:]) {
			t.Errorf("stdout %q stderr %q, want the output after event 2", r.stdout, r.stderr)
		}
		reqs := api.requests()
		if len(reqs) != 4 || reqs[0].Query["cursor"][0] != cursor || reqs[0].Query["follow"][0] != "true" {
			t.Fatalf("requests %+v", reqs)
		}
		want := []string{cursor, strconv.FormatInt(s.events[2].id, 10), strconv.FormatInt(s.events[2].id, 10), strconv.FormatInt(s.events[4].id, 10)}
		for i, q := range reqs {
			got := q.Header.Get("Last-Event-ID")
			if i == 0 {
				got = q.Query["cursor"][0]
			}
			if got != want[i] {
				t.Errorf("request %d resumes at %q, want %q", i, got, want[i])
			}
		}
	})
	t.Run("an explicit --timeout bounds -f", func(t *testing.T) {
		t.Parallel()
		api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			_ = http.NewResponseController(w).Flush()
			select { // a job that never ends
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		})
		start := time.Now()
		r := cli(t, api.URL, "", nil, "--timeout", "200ms", "logs", "-f", "job-1")
		if r.code != 1 || !strings.Contains(r.stderr, "deadline exceeded") || time.Since(start) > 5*time.Second {
			t.Errorf("exit %d after %v, stderr %q", r.code, time.Since(start), r.stderr)
		}
	})
	t.Run("unknown job", func(t *testing.T) {
		t.Parallel()
		api := newFakeAPI(t, problem(404, "not_found", "job job-9 not found"))
		r := cli(t, api.URL, "", nil, "logs", "-f", "job-9")
		if r.code != 1 || r.stderr != "genesis: job job-9 not found (not_found, request id req-42)\n" {
			t.Errorf("exit %d stderr %q", r.code, r.stderr)
		}
		if n := len(api.requests()); n != 1 {
			t.Errorf("%d requests: a 404 must not be retried", n)
		}
	})
}

func TestCancel(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		switch r.URL.Path {
		case "/v1/jobs/job-1/cancel":
			reply(202, `{"id":"job-1","state":"running","mode":"background"}`)(w, r, b)
		case "/v1/jobs/job-2/cancel":
			reply(202, `{"id":"job-2","state":"succeeded","mode":"background"}`)(w, r, b)
		default:
			problem(409, "not_cancelable", "job job-3 runs synchronously")(w, r, b)
		}
	})
	r := cli(t, api.URL, "", nil, "cancel", "job-1")
	if r.code != 0 || r.stdout != "job-1\n" || r.stderr != "" {
		t.Errorf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if req := api.requests()[0]; req.Method != "POST" || req.Body != "" {
		t.Errorf("request %s with body %q", req.Method, req.Body)
	}
	r = cli(t, api.URL, "", nil, "cancel", "job-2")
	if r.code != 0 || r.stderr != "genesis: job job-2 had already ended (succeeded)\n" {
		t.Errorf("exit %d stderr %q", r.code, r.stderr)
	}
	r = cli(t, api.URL, "", nil, "cancel", "job-3")
	if r.code != 1 || !strings.Contains(r.stderr, "runs synchronously (not_cancelable") {
		t.Errorf("exit %d stderr %q", r.code, r.stderr)
	}
}
