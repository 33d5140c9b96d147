package slowlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"genesis.dev/sandbox/internal/slowlog"
)

// served is what one request through a root handler like the API's left
// behind: the log's lines (JSON) and the routes counted.
type served struct {
	lines   []map[string]any
	counted []string
}

// call is one request through a root handler like the API's (Begin
// before the route, End after it, the route's handler filling in the
// Request), taking took of synctest's clock.
type call struct {
	threshold time.Duration
	took      time.Duration
	// allowMS is the wait the caller asked for (AllowMS).
	allowMS int64
	// contentType is the answer's; upgrade, the request's Upgrade header.
	contentType, upgrade string
	hops                 bool
	// upload is the size of the request's body, which the handler reads;
	// download, of the answer it writes.
	upload, download int
}

func serve(t *testing.T, c call) served {
	t.Helper()
	var out served
	var buf bytes.Buffer
	l, err := slowlog.New(slowlog.Config{Threshold: c.threshold, Logger: slog.New(slog.NewJSONHandler(&buf, nil)),
		Counted: func(route string) { out.counted = append(out.counted, route) }})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/sandboxes/{id}/exec", func(w http.ResponseWriter, r *http.Request) {
		q := slowlog.Of(r.Context())
		q.SetTenant("acme")
		slowlog.AllowMS(r.Context(), c.allowMS, 0)
		if c.hops {
			q.SetHops(func(yield func(string, time.Duration) bool) {
				_ = yield("pre", 1500*time.Microsecond) && yield("agent", c.took-2*time.Millisecond)
			})
		}
		if n, err := io.Copy(io.Discard, r.Body); err != nil || n != int64(max(c.upload, 2)) {
			t.Errorf("read %d bytes of the body (%v)", n, err)
		}
		time.Sleep(c.took) // on synctest's clock: no real wait
		if c.contentType != "" {
			w.Header().Set("Content-Type", c.contentType)
		}
		w.WriteHeader(http.StatusOK)
		// The API's root handler counts what its writer writes.
		n, _ := w.Write(make([]byte, c.download))
		q.Moved(n)
	})
	synctest.Test(t, func(t *testing.T) {
		body := "{}"
		if c.upload > 0 {
			body = strings.Repeat("x", c.upload)
		}
		r := httptest.NewRequest("POST", "/v1/sandboxes/sbx_1/exec", strings.NewReader(body))
		if c.upgrade != "" {
			r.Header.Set("Upgrade", c.upgrade)
		}
		w := httptest.NewRecorder()
		q := l.Begin(time.Now())
		r = r.WithContext(slowlog.With(r.Context(), q))
		r.Body = q.Body(r.Body)
		mux.ServeHTTP(w, r)
		logged := l.End(q, r, w.Code, "req_1", slowlog.Streamed(r, w.Header()))
		if logged != (buf.Len() > 0) {
			t.Errorf("End said %v with the log %q", logged, buf.String())
		}
	})
	for line := range strings.Lines(buf.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out.lines = append(out.lines, m)
	}
	return out
}

// TestSlowRequestLine checks the one line of a slow request and each of
// its fields.
func TestSlowRequestLine(t *testing.T) {
	t.Parallel()
	got := serve(t, call{threshold: 2 * time.Second, took: 3 * time.Second, hops: true})
	if len(got.lines) != 1 {
		t.Fatalf("want one line, got %v", got.lines)
	}
	want := map[string]any{
		"level": "WARN", "msg": "slow request", "method": "POST", "route": "POST /v1/sandboxes/{id}/exec", "status": 200.0,
		"duration_ms": 3000.0, "tenant": "acme", "sandbox": "sbx_1", "request_id": "req_1", "bytes": 2.0,
		"hops_ms": map[string]any{"pre": 1.5, "agent": 2998.0},
	}
	line := got.lines[0]
	delete(line, "time")
	if !jsonEqual(line, want) {
		t.Errorf("line %v\nwant %v", line, want)
	}
	if len(got.counted) != 1 || got.counted[0] != "POST /v1/sandboxes/{id}/exec" {
		t.Errorf("counted %v, want the route once", got.counted)
	}
}

// TestNotSlow checks what is not a slow request: fast ones, waits the
// caller asked for, streams and upgrades, and any request with the
// threshold 0.
func TestNotSlow(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]call{
		"fast":                          {threshold: 2 * time.Second, took: 50 * time.Millisecond},
		"at the threshold":              {threshold: 2 * time.Second, took: 2 * time.Second},
		"within the exec's timeout":     {threshold: 2 * time.Second, took: 50 * time.Second, allowMS: 60_000},
		"the timeout and the threshold": {threshold: 2 * time.Second, took: 62 * time.Second, allowMS: 60_000},
		"server-sent events":            {threshold: 2 * time.Second, took: time.Hour, contentType: "text/event-stream"},
		"ndjson":                        {threshold: 2 * time.Second, took: time.Hour, contentType: "application/x-ndjson"},
		"websocket":                     {threshold: 2 * time.Second, took: time.Hour, upgrade: "websocket"},
		"an upload of 5 MiB in 7 s":     {threshold: 2 * time.Second, took: 7 * time.Second, upload: 5 << 20},
		"a download of 5 MiB in 7 s":    {threshold: 2 * time.Second, took: 7 * time.Second, download: 5 << 20},
		"off":                           {took: time.Hour},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := serve(t, c); len(got.lines) != 0 || len(got.counted) != 0 {
				t.Errorf("logged %v, counted %v", got.lines, got.counted)
			}
		})
	}
}

// TestSlowBeyondItsWait checks that a request slower than the wait its
// caller asked for and the threshold is slow, and says what it allowed.
func TestSlowBeyondItsWait(t *testing.T) {
	t.Parallel()
	got := serve(t, call{threshold: 2 * time.Second, took: 3100 * time.Millisecond, allowMS: 1000})
	if len(got.lines) != 1 || got.lines[0]["allowed_ms"] != 1000.0 || got.lines[0]["duration_ms"] != 3100.0 {
		t.Fatalf("want one line with allowed_ms 1000 and duration_ms 3100, got %v", got.lines)
	}
	if _, ok := got.lines[0]["hops_ms"]; ok {
		t.Errorf("a route without hops logged %v", got.lines[0]["hops_ms"])
	}
}

// TestSlowBeyondItsTransfer checks that a request is allowed a second per
// MiB it moves (slowlog.TransferRate), no more, and says so.
func TestSlowBeyondItsTransfer(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]call{
		"upload":   {threshold: 2 * time.Second, took: 7100 * time.Millisecond, upload: 5 << 20},
		"download": {threshold: 2 * time.Second, took: 7100 * time.Millisecond, download: 5 << 20},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := serve(t, c)
			moved := float64(c.upload + c.download)
			if c.upload == 0 {
				moved += 2 // the body "{}"
			}
			if len(got.lines) != 1 || got.lines[0]["allowed_ms"] != 5000.0 || got.lines[0]["bytes"] != moved {
				t.Fatalf("want one line with allowed_ms 5000 and the bytes moved, got %v", got.lines)
			}
		})
	}
}

func TestNegativeThreshold(t *testing.T) {
	t.Parallel()
	if _, err := slowlog.New(slowlog.Config{Threshold: -time.Second}); err == nil {
		t.Error("a negative threshold was taken")
	}
}

// TestNilRequest checks that the handlers' calls do nothing without a
// Request (a request not through the root handler) and a nil Log logs
// nothing.
func TestNilRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	slowlog.AllowMS(ctx, 5, 0)
	slowlog.Of(ctx).SetTenant("a")
	slowlog.Of(ctx).SetSandbox("s")
	slowlog.Of(ctx).SetHops(nil)
	var l *slowlog.Log
	q := l.Begin(time.Now().Add(-time.Hour))
	if l.On() || l.End(q, httptest.NewRequest("GET", "/", nil), 200, "", false) {
		t.Error("a nil Log is on")
	}
}

func TestServerTiming(t *testing.T) {
	t.Parallel()
	start := time.Now()
	var l *slowlog.Log
	q := l.Begin(start)
	q.SetHops(func(yield func(string, time.Duration) bool) {
		_ = yield("pre", 250*time.Microsecond) && yield("agent", 3*time.Millisecond)
	})
	if got, want := q.ServerTiming(start.Add(4*time.Millisecond)), "pre;dur=0.250, agent;dur=3.000, handler;dur=4.000"; got != want {
		t.Errorf("Server-Timing %q, want %q", got, want)
	}
}

// jsonEqual compares decoded JSON values.
func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// BenchmarkRequest is what the log adds to a request that is not slow,
// with hops as an exec's: its record, the context value, the hops' closure
// and the end's check (the hops themselves are the stopwatch's).
func BenchmarkRequest(b *testing.B) {
	l, err := slowlog.New(slowlog.Config{Threshold: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	r := httptest.NewRequest("POST", "/v1/sandboxes/sbx_1/exec", nil)
	ctx := r.Context()
	b.ReportAllocs()
	for b.Loop() {
		q := l.Begin(time.Now())
		c := slowlog.With(ctx, q)
		slowlog.AllowMS(c, 0, time.Minute)
		var t [10]time.Duration
		slowlog.Of(c).SetHops(func(yield func(string, time.Duration) bool) {
			for _, d := range t {
				if !yield("x", d) {
					return
				}
			}
		})
		if l.End(q, r, 200, "req_1", false) {
			b.Fatal("logged")
		}
	}
}
