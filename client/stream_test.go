package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// logEvent is one event of a fake job log. Its id is the byte cursor after
// it, as the service numbers them.
type logEvent struct {
	id   int64
	name string
	data string // JSON
}

// fakeLog builds the events of a job that writes out and errOut in chunks,
// then exits with code.
func fakeLog(jobID string, out, errOut []byte, chunk, code int) []logEvent {
	var evs []logEvent
	var cursor int64
	add := func(name string, v any) {
		b, _ := json.Marshal(v)
		cursor += 8 + int64(len(b)) // like a frame header plus payload
		evs = append(evs, logEvent{id: cursor, name: name, data: string(b)})
	}
	var oo, eo int
	for oo < len(out) || eo < len(errOut) {
		if oo < len(out) {
			n := min(chunk, len(out)-oo)
			add("stdout", map[string]any{"offset": oo, "data": base64.StdEncoding.EncodeToString(out[oo : oo+n])})
			oo += n
		}
		if eo < len(errOut) {
			n := min(chunk/3+1, len(errOut)-eo)
			add("stderr", map[string]any{"offset": eo, "data": base64.StdEncoding.EncodeToString(errOut[eo : eo+n])})
			eo += n
		}
	}
	add("exit", ExitEvent{JobID: jobID, State: "failed", ExitCode: &code, ExitReason: "exited",
		StdoutBytes: int64(len(out)), StderrBytes: int64(len(errOut)), DurationMS: 12})
	return evs
}

// randomBytes returns n reproducible bytes, most of them not UTF-8 text.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// sseServer serves a fake job log over SSE the way the service does
// (?cursor= over Last-Event-ID, 400 for a cursor that is not an event id),
// and breaks connections as its plan says.
type sseServer struct {
	t      *testing.T
	jobID  string
	events []logEvent

	mu sync.Mutex
	// plan[k] says how connection k ends: -1 serves to the end; n >= 0
	// sends n events, half of the next one, and drops the connection.
	plan []int
	// statuses[k], when set, answers connection k with that status instead.
	statuses map[int]int
	// replay makes the server ignore the cursor partly: it starts one event
	// early, as an at-least-once server would.
	replay bool
	// silent makes connection k send headers and then nothing.
	silent map[int]bool
	// dropInJob cuts a streamed exec off in the middle of its job event.
	dropInJob bool
	// onRequest, when set, runs first for each connection k.
	onRequest func(k int)

	conns      int
	cursors    []string // Last-Event-ID or cursor of each log connection
	headers    []http.Header
	execBodies []string
	// expect is the id of the last event this server sent whole: where a
	// client that lost the connection must resume.
	expect string
	// delivered, when set, says instead the id of the last event the
	// client passed on (for clients that may drop a connection themselves
	// before reading what the server sent).
	delivered func() string
}

func (s *sseServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	k := s.conns
	s.conns++
	s.headers = append(s.headers, r.Header.Clone())
	status := s.statuses[k]
	planned := -1
	if k < len(s.plan) {
		planned = s.plan[k]
	}
	silent := s.silent[k]
	onRequest := s.onRequest
	s.mu.Unlock()
	if onRequest != nil {
		onRequest(k)
	}

	if status != 0 {
		writeProblem(w, status, "unavailable", "try later")
		return
	}
	var start int64
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/sandboxes/sb-1/exec":
		s.mu.Lock()
		s.execBodies = append(s.execBodies, string(body))
		s.mu.Unlock()
		if r.Header.Get("Accept") != "text/event-stream" {
			s.t.Errorf("exec Accept = %q", r.Header.Get("Accept"))
		}
	case r.Method == http.MethodGet && r.URL.Path == "/v1/jobs/"+s.jobID:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Job{ID: s.jobID, SandboxID: "sb-1", State: "running", Mode: "background"})
		return
	case r.Method == http.MethodGet && r.URL.Path == "/v1/jobs/"+s.jobID+"/logs":
		c := r.Header.Get("Last-Event-ID")
		if q := r.URL.Query().Get("cursor"); q != "" {
			c = q
		}
		s.mu.Lock()
		s.cursors = append(s.cursors, c)
		if s.delivered != nil {
			if want := s.delivered(); c != want {
				s.t.Errorf("connection %d resumes at %q, want %q (the last event delivered)", k, c, want)
			}
		} else if c != s.expect {
			s.t.Errorf("connection %d resumes at %q, want %q (the last event sent whole)", k, c, s.expect)
		}
		s.mu.Unlock()
		if c != "" {
			n, err := strconv.ParseInt(c, 10, 64)
			if err != nil || !s.validCursor(n) {
				writeProblem(w, http.StatusBadRequest, "invalid_cursor", "cursor "+c+" is not an event id")
				return
			}
			start = n
		}
		if f := r.URL.Query().Get("follow"); f != "true" && f != "false" {
			s.t.Errorf("follow = %q", f)
		}
	default:
		writeProblem(w, http.StatusNotFound, "not_found", r.Method+" "+r.URL.Path)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Genesis-Job-ID", s.jobID)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if r.Method == http.MethodPost {
		b, _ := json.Marshal(Job{ID: s.jobID, SandboxID: "sb-1", State: "running", Mode: "background"})
		frame := fmt.Sprintf("id: 0\nevent: job\ndata: %s\n\n", b)
		if s.dropInJob {
			_, _ = io.WriteString(w, frame[:len(frame)-1])
			_ = rc.Flush()
			panic(http.ErrAbortHandler)
		}
		_, _ = io.WriteString(w, frame)
		s.mu.Lock()
		s.expect = "0"
		s.mu.Unlock()
	}
	if silent {
		_ = rc.Flush()
		<-r.Context().Done()
		return
	}
	sent := 0
	for i, ev := range s.events {
		if ev.id <= start && !(s.replay && i+1 < len(s.events) && s.events[i+1].id > start) {
			continue
		}
		frame := fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", ev.id, ev.name, ev.data)
		if planned >= 0 && sent == planned {
			_, _ = io.WriteString(w, frame[:len(frame)/2])
			_ = rc.Flush()
			panic(http.ErrAbortHandler) // drop the connection mid-event
		}
		_, _ = io.WriteString(w, frame)
		s.mu.Lock()
		s.expect = strconv.FormatInt(ev.id, 10)
		s.mu.Unlock()
		if i%3 == 0 {
			_, _ = io.WriteString(w, ": keepalive\n\n")
		}
		_ = rc.Flush()
		sent++
	}
}

func (s *sseServer) validCursor(n int64) bool {
	if n == 0 {
		return true
	}
	for _, ev := range s.events {
		if ev.id == n {
			return true
		}
	}
	return false
}

func writeProblem(w http.ResponseWriter, status int, code, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	b, _ := json.Marshal(Problem{Title: http.StatusText(status), Status: status, Code: code, Detail: detail})
	_, _ = w.Write(b)
}

func (s *sseServer) stats() (conns int, cursors []string, headers []http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns, append([]string(nil), s.cursors...), append([]http.Header(nil), s.headers...)
}

func newSSEClient(t *testing.T, s *sseServer) *Client {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c := New(srv.URL, "key-123", WithHTTPClient(srv.Client()))
	c.retryMin, c.retryMax = time.Millisecond, 5*time.Millisecond
	return c
}

// collector gathers what a stream delivered.
type collector struct {
	events         []LogEvent
	stdout, stderr bytes.Buffer

	mu     sync.Mutex
	lastID string
}

func (c *collector) last() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastID
}

func (c *collector) fn(ev LogEvent) error {
	c.mu.Lock()
	c.lastID = ev.ID
	c.mu.Unlock()
	c.events = append(c.events, ev)
	switch ev.Event {
	case EventStdout:
		c.stdout.Write(ev.Data)
	case EventStderr:
		c.stderr.Write(ev.Data)
	}
	return nil
}

func (c *collector) exit() *ExitEvent {
	if n := len(c.events); n > 0 {
		return c.events[n-1].Exit
	}
	return nil
}

// ids returns the ids of the events delivered.
func (c *collector) ids() []string {
	var out []string
	for _, ev := range c.events {
		out = append(out, ev.ID)
	}
	return out
}

func TestStreamLogsDecodesEvents(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/jobs/job-1/logs" || r.URL.Query().Get("follow") != "true" || r.URL.Query().Get("cursor") != "40" ||
			r.Header.Get("Accept") != "text/event-stream" || r.Header.Get("Authorization") != "Bearer key-123" ||
			r.Header.Get("Last-Event-ID") != "" {
			t.Errorf("request %s %v", r.URL, r.Header)
		}
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		_, _ = io.WriteString(w, ": hello\r\n\r\n"+
			"id: 52\r\nevent: stdout\r\ndata: {\"offset\":3,\"data\":\"/wBh\"}\r\n\r\n"+
			"id: 60\nevent: future\ndata: {\"x\":1}\n\n"+
			"id: 70\nevent: stderr\ndata: {\"offset\":0,\ndata: \"data\":\"ZQ==\"}\n\n"+
			"id: 80\nevent: truncated\ndata: {\"stream\":\"stdout\",\"kept\":4}\n\n"+
			"id: 99\nevent: exit\ndata: {\"job_id\":\"job-1\",\"state\":\"lost\",\"exit_code\":null,\"exit_reason\":\"lost\",\"error\":\"agent gone\",\"stdout_bytes\":9,\"stderr_bytes\":1,\"stdout_truncated\":true,\"stderr_truncated\":false}\n\n"+
			"id: 100\nevent: stdout\ndata: {\"offset\":4,\"data\":\"eA==\"}\n\n")
	}))
	t.Cleanup(srv.Close)
	var got collector
	err := New(srv.URL, "key-123", WithHTTPClient(srv.Client())).StreamLogs(context.Background(), "job-1", StreamOptions{Cursor: "40", Follow: true}, got.fn)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"52", "70", "80", "99"}; strings.Join(got.ids(), ",") != strings.Join(want, ",") {
		t.Fatalf("ids %v, want %v (unknown events skipped, nothing after exit)", got.ids(), want)
	}
	e := got.events
	if e[0].Event != EventStdout || e[0].Offset != 3 || !bytes.Equal(e[0].Data, []byte{0xff, 0, 'a'}) {
		t.Errorf("stdout event %+v", e[0])
	}
	if e[1].Event != EventStderr || string(e[1].Data) != "e" {
		t.Errorf("stderr event with multi-line data %+v", e[1])
	}
	if tr := e[2].Truncated; tr == nil || tr.Stream != "stdout" || tr.Kept != 4 {
		t.Errorf("truncated event %+v", e[2])
	}
	if x := e[3].Exit; x == nil || x.ExitCode != nil || x.ExitReason != "lost" || x.Error != "agent gone" || !x.StdoutTruncated || x.StdoutBytes != 9 {
		t.Errorf("exit event %+v", e[3].Exit)
	}
}

func TestStreamLogsResumesByteExact(t *testing.T) {
	t.Parallel()
	out := randomBytes(1, 20000)
	errOut := randomBytes(2, 3000)
	tests := []struct {
		name     string
		plan     []int
		statuses map[int]int
		replay   bool
		silent   map[int]bool
		idle     time.Duration
		conns    int
	}{
		{name: "no drop", conns: 1},
		{name: "drop mid-event at once", plan: []int{0}, conns: 2},
		{name: "several drops", plan: []int{3, 0, 5, 1, 7}, conns: 6},
		{name: "drops and unavailable", plan: []int{2, -1, 4}, statuses: map[int]int{1: 503, 3: 502}, conns: 5},
		{name: "at-least-once server", plan: []int{4, 4, 4}, replay: true, conns: 4},
		{name: "silent connection", plan: []int{2}, silent: map[int]bool{1: true}, idle: 100 * time.Millisecond, conns: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &sseServer{t: t, jobID: "job-7", events: fakeLog("job-7", out, errOut, 700, 3),
				plan: tc.plan, statuses: tc.statuses, replay: tc.replay, silent: tc.silent}
			c := newSSEClient(t, s)
			var got collector
			if tc.silent != nil {
				s.delivered = got.last
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := c.StreamLogs(ctx, "job-7", StreamOptions{Follow: true, Resume: true, IdleTimeout: tc.idle}, got.fn)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.stdout.Bytes(), out) || !bytes.Equal(got.stderr.Bytes(), errOut) {
				t.Fatalf("output differs: stdout %d/%d bytes, stderr %d/%d bytes", got.stdout.Len(), len(out), got.stderr.Len(), len(errOut))
			}
			if x := got.exit(); x == nil || *x.ExitCode != 3 {
				t.Fatalf("last event %+v, want exit 3", got.events[len(got.events)-1])
			}
			// Every event once, in order.
			for i := 1; i < len(got.events); i++ {
				a, _ := strconv.ParseInt(got.events[i-1].ID, 10, 64)
				b, _ := strconv.ParseInt(got.events[i].ID, 10, 64)
				if b <= a {
					t.Errorf("event %d after %d", b, a)
				}
			}
			if !tc.replay && len(got.events) != len(s.events) {
				t.Errorf("%d events delivered, want %d", len(got.events), len(s.events))
			}
			conns, cursors, headers := s.stats()
			if tc.silent == nil && (conns != tc.conns || len(cursors) != tc.conns-len(tc.statuses)) {
				t.Errorf("%d connections (%d log requests), want %d", conns, len(cursors), tc.conns)
			}
			for i, h := range headers {
				if h.Get("Authorization") != "Bearer key-123" || h.Get("Accept") != "text/event-stream" {
					t.Errorf("connection %d headers %v", i, h)
				}
			}
		})
	}
}

func TestStreamLogsFailures(t *testing.T) {
	t.Parallel()
	out := randomBytes(3, 5000)
	events := fakeLog("job-7", out, nil, 500, 0)
	ctx := context.Background()

	t.Run("drop without resume", func(t *testing.T) {
		t.Parallel()
		s := &sseServer{t: t, jobID: "job-7", events: events, plan: []int{3}}
		var got collector
		err := newSSEClient(t, s).StreamLogs(ctx, "job-7", StreamOptions{Follow: true}, got.fn)
		if err == nil || !strings.Contains(err.Error(), "job-7") || len(got.events) != 3 {
			t.Errorf("err %v after %d events, want an error after 3", err, len(got.events))
		}
		if n, _, _ := s.stats(); n != 1 {
			t.Errorf("%d connections", n)
		}
	})
	t.Run("unknown job is not retried", func(t *testing.T) {
		t.Parallel()
		s := &sseServer{t: t, jobID: "job-7", events: events}
		err := newSSEClient(t, s).StreamLogs(ctx, "job-x", StreamOptions{Follow: true, Resume: true}, (&collector{}).fn)
		if !IsNotFound(err) {
			t.Errorf("err = %v, want not found", err)
		}
		if n, _, _ := s.stats(); n != 1 {
			t.Errorf("%d connections", n)
		}
	})
	t.Run("invalid cursor is not retried", func(t *testing.T) {
		t.Parallel()
		s := &sseServer{t: t, jobID: "job-7", events: events, expect: "13"}
		err := newSSEClient(t, s).StreamLogs(ctx, "job-7", StreamOptions{Cursor: "13", Follow: true, Resume: true}, (&collector{}).fn)
		if ErrorCode(err) != "invalid_cursor" {
			t.Errorf("err = %v, want invalid_cursor", err)
		}
		if n, _, _ := s.stats(); n != 1 {
			t.Errorf("%d connections", n)
		}
	})
	t.Run("callback error stops the stream", func(t *testing.T) {
		t.Parallel()
		s := &sseServer{t: t, jobID: "job-7", events: events, plan: []int{2}}
		stop := errors.New("enough")
		n := 0
		err := newSSEClient(t, s).StreamLogs(ctx, "job-7", StreamOptions{Follow: true, Resume: true}, func(LogEvent) error {
			if n++; n == 4 {
				return stop
			}
			return nil
		})
		if err != stop || n != 4 {
			t.Errorf("err = %v after %d calls, want the callback's error after 4", err, n)
		}
	})
	t.Run("resume until the context ends", func(t *testing.T) {
		t.Parallel()
		s := &sseServer{t: t, jobID: "job-7", events: events, statuses: map[int]int{}}
		for i := range 1000 {
			s.statuses[i] = http.StatusServiceUnavailable
		}
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		s.onRequest = func(k int) {
			if k == 3 {
				cancel()
			}
		}
		err := newSSEClient(t, s).StreamLogs(cctx, "job-7", StreamOptions{Follow: true, Resume: true}, (&collector{}).fn)
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "try later") {
			t.Errorf("err = %v, want the context's end and the last error", err)
		}
		if n, _, _ := s.stats(); n != 4 {
			t.Errorf("%d attempts, want 4", n)
		}
	})
	t.Run("resume with a cursor given", func(t *testing.T) {
		t.Parallel()
		cursor := strconv.FormatInt(events[4].id, 10)
		s := &sseServer{t: t, jobID: "job-7", events: events, plan: []int{1}, expect: cursor}
		var got collector
		err := newSSEClient(t, s).StreamLogs(ctx, "job-7", StreamOptions{Cursor: cursor, Follow: true, Resume: true}, got.fn)
		if err != nil || !bytes.Equal(got.stdout.Bytes(), out[5*500:]) {
			t.Errorf("err %v, %d bytes from cursor %s", err, got.stdout.Len(), cursor)
		}
		if _, cursors, headers := s.stats(); len(cursors) != 2 || headers[0].Get("Last-Event-ID") != "" || headers[1].Get("Last-Event-ID") == "" {
			t.Errorf("first request must use ?cursor=, the resume Last-Event-ID: %v", cursors)
		}
	})
}

// TestStreamLogsEnds covers streams that end without an exit event.
func TestStreamLogsEnds(t *testing.T) {
	t.Parallel()
	var calls int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "id: 20\nevent: stdout\ndata: {\"offset\":0,\"data\":\"aGk=\"}\n\n")
	}))
	t.Cleanup(srv.Close)
	c := New(srv.URL, "k", WithHTTPClient(srv.Client()))
	var got collector
	if err := c.StreamLogs(context.Background(), "job-1", StreamOptions{Resume: true}, got.fn); err != nil || got.stdout.String() != "hi" {
		t.Errorf("without follow: err %v, stdout %q; want the log so far and no error", err, got.stdout.String())
	}
	if err := c.StreamLogs(context.Background(), "job-1", StreamOptions{Follow: true}, (&collector{}).fn); err == nil || !strings.Contains(err.Error(), "before the exit event") {
		t.Errorf("followed stream without exit: err = %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 2 {
		t.Errorf("%d requests, want 2", calls)
	}
}

func TestStreamLogsProtocolErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, ct, body string
	}{
		{"not an event stream", "application/json", `{"id":"job-1"}`},
		{"bad base64", "text/event-stream", "id: 1\nevent: stdout\ndata: {\"offset\":0,\"data\":\"!!\"}\n\n"},
		{"bad json", "text/event-stream", "id: 1\nevent: exit\ndata: {\n\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			var mu sync.Mutex
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				calls++
				mu.Unlock()
				w.Header().Set("Content-Type", tc.ct)
				_, _ = io.WriteString(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			err := New(srv.URL, "k", WithHTTPClient(srv.Client())).StreamLogs(context.Background(), "job-1", StreamOptions{Follow: true, Resume: true}, (&collector{}).fn)
			if err == nil {
				t.Fatal("no error")
			}
			mu.Lock()
			defer mu.Unlock()
			if calls != 1 {
				t.Errorf("%d requests: a protocol error must not be retried", calls)
			}
		})
	}
}

func TestExecStream(t *testing.T) {
	t.Parallel()
	out := randomBytes(4, 12000)
	errOut := randomBytes(5, 2000)
	tests := []struct {
		name      string
		plan      []int
		dropInJob bool
		conns     int
	}{
		{name: "no drop", conns: 1},
		{name: "drop after the job event", plan: []int{0}, conns: 2},
		{name: "drops in exec and in logs", plan: []int{6, 2, 0, 9}, conns: 5},
		{name: "drop inside the job event", dropInJob: true, conns: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &sseServer{t: t, jobID: "job-9", events: fakeLog("job-9", out, errOut, 1000, 0), plan: tc.plan, dropInJob: tc.dropInJob}
			c := newSSEClient(t, s)
			var got collector
			req := ExecRequest{Command: []string{"gen"}, Background: true, TimeoutMS: 5000}
			err := c.ExecStream(context.Background(), "sb-1", req, StreamOptions{Resume: true, Cursor: "ignored"}, got.fn)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.stdout.Bytes(), out) || !bytes.Equal(got.stderr.Bytes(), errOut) {
				t.Fatalf("output differs: stdout %d/%d bytes, stderr %d/%d", got.stdout.Len(), len(out), got.stderr.Len(), len(errOut))
			}
			if x := got.exit(); x == nil || *x.ExitCode != 0 || x.JobID != "job-9" {
				t.Errorf("exit %+v", x)
			}
			if got.events[0].Event != EventJob || got.events[0].Job.ID != "job-9" || got.events[0].ID != "0" {
				t.Errorf("first event %+v, want the job", got.events[0])
			}
			conns, _, _ := s.stats()
			if conns != tc.conns {
				t.Errorf("%d connections, want %d", conns, tc.conns)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if len(s.execBodies) != 1 {
				t.Fatalf("%d exec requests: a POST must never be repeated", len(s.execBodies))
			}
			assertJSONEqual(t, s.execBodies[0], `{"command":["gen"],"timeout_ms":5000}`)
		})
	}
}

func TestExecStreamFailures(t *testing.T) {
	t.Parallel()
	events := fakeLog("job-9", []byte("hello"), nil, 2, 0)
	ctx := context.Background()
	t.Run("drop without resume", func(t *testing.T) {
		t.Parallel()
		s := &sseServer{t: t, jobID: "job-9", events: events, plan: []int{1}}
		var got collector
		err := newSSEClient(t, s).ExecStream(ctx, "sb-1", ExecRequest{Script: "x"}, StreamOptions{}, got.fn)
		if err == nil || len(got.events) != 2 || got.stdout.String() != "he" {
			t.Errorf("err %v after %+v", err, got.events)
		}
	})
	t.Run("problem", func(t *testing.T) {
		t.Parallel()
		s := &sseServer{t: t, jobID: "job-9", events: events}
		err := newSSEClient(t, s).ExecStream(ctx, "sb-2", ExecRequest{Script: "x"}, StreamOptions{Resume: true}, (&collector{}).fn)
		if !IsNotFound(err) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("unavailable is not retried", func(t *testing.T) {
		t.Parallel()
		s := &sseServer{t: t, jobID: "job-9", events: events, statuses: map[int]int{0: 503}}
		err := newSSEClient(t, s).ExecStream(ctx, "sb-1", ExecRequest{Script: "x"}, StreamOptions{Resume: true}, (&collector{}).fn)
		if ErrorCode(err) != "unavailable" {
			t.Errorf("err = %v", err)
		}
		if n, _, _ := s.stats(); n != 1 {
			t.Errorf("%d connections: the exec must not be sent twice", n)
		}
	})
}

func TestLogEventJSON(t *testing.T) {
	t.Parallel()
	code := 0
	tests := []struct {
		ev   LogEvent
		want string
	}{
		{LogEvent{ID: "9", Event: EventStdout, Offset: 0, Data: []byte{0xff}}, `{"id":"9","event":"stdout","offset":0,"data":"/w=="}`},
		{LogEvent{ID: "10", Event: EventStderr, Offset: 4}, `{"id":"10","event":"stderr","offset":4,"data":""}`},
		{LogEvent{ID: "11", Event: EventTruncated, Truncated: &TruncatedEvent{Stream: "stdout", Kept: 3}}, `{"id":"11","event":"truncated","truncated":{"stream":"stdout","kept":3}}`},
		{LogEvent{ID: "12", Event: EventExit, Exit: &ExitEvent{JobID: "j", State: "succeeded", ExitCode: &code, ExitReason: "exited"}},
			`{"id":"12","event":"exit","exit":{"job_id":"j","state":"succeeded","exit_code":0,"exit_reason":"exited","stdout_bytes":0,"stderr_bytes":0,"stdout_truncated":false,"stderr_truncated":false}}`},
	}
	for _, tc := range tests {
		b, err := json.Marshal(tc.ev)
		if err != nil {
			t.Fatal(err)
		}
		assertJSONEqual(t, string(b), tc.want)
		var back LogEvent
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.ID != tc.ev.ID || back.Event != tc.ev.Event || back.Offset != tc.ev.Offset || !bytes.Equal(back.Data, tc.ev.Data) {
			t.Errorf("round trip %+v -> %+v", tc.ev, back)
		}
	}
}

// TestStreamLogsTextEncoding: the client asks for the text encoding unless
// told otherwise, decodes text-form output events (offset line, then the
// bytes) exactly, JSON ones in the same stream too, and refuses an unknown
// encoding before sending anything.
func TestStreamLogsTextEncoding(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var encodings []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		encodings = append(encodings, r.URL.Query().Get("encoding"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "id: 10\nevent: stdout\ndata: 0\ndata:  two spaces, then a NUL \x00 and ünï\ndata: \ndata: next\n\n"+
			"id: 20\nevent: stderr\ndata: 7\ndata: {not json}\n\n"+
			"id: 30\nevent: stdout\ndata: {\"offset\":41,\"data\":\"/w0K\"}\n\n"+
			"id: 40\nevent: stdout\ndata: 44\ndata: \ndata: \n\n"+
			"id: 50\nevent: exit\ndata: {\"job_id\":\"job-1\",\"state\":\"succeeded\",\"exit_code\":0,\"exit_reason\":\"exited\"}\n\n")
	}))
	t.Cleanup(srv.Close)
	c := New(srv.URL, "key", WithHTTPClient(srv.Client()))
	var got collector
	if err := c.StreamLogs(context.Background(), "job-1", StreamOptions{Follow: true}, got.fn); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		offset int64
		data   string
	}{{0, " two spaces, then a NUL \x00 and ünï\n\nnext"}, {7, "{not json}"}, {41, "\xff\r\n"}, {44, "\n"}}
	if len(got.events) != len(want)+1 {
		t.Fatalf("%d events, want %d", len(got.events), len(want)+1)
	}
	for i, w := range want {
		if e := got.events[i]; e.Offset != w.offset || string(e.Data) != w.data {
			t.Errorf("event %d: offset %d data %q, want %d %q", i, e.Offset, e.Data, w.offset, w.data)
		}
	}
	if err := c.StreamLogs(context.Background(), "job-1", StreamOptions{Encoding: EncodingBase64}, func(LogEvent) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := c.StreamLogs(context.Background(), "job-1", StreamOptions{Encoding: "utf-7"}, func(LogEvent) error { return nil }); err == nil {
		t.Error("an unknown encoding was accepted")
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(encodings, ",") != "text,base64" {
		t.Errorf("encoding parameters sent %q, want text then base64 and nothing for the bad one", encodings)
	}
}
