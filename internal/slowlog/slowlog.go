package slowlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Config configures a Log.
type Config struct {
	// Threshold is how much longer than the wait its caller asked for a
	// request may take before it is logged as slow; 0 logs nothing.
	Threshold time.Duration
	// Logger receives the lines (slog.Default() when nil).
	Logger *slog.Logger
	// Counted, when set, is told the route of each slow request (the
	// metric genesis_http_slow_requests_total).
	Counted func(route string)
	// Clock, when set, replaces time.Now in telling how long a request
	// took (for tests).
	Clock func() time.Time
}

// Log decides which requests were slow and logs them.
type Log struct {
	threshold time.Duration
	log       *slog.Logger
	counted   func(route string)
	clock     func() time.Time
}

// New returns a Log of cfg.
func New(cfg Config) (*Log, error) {
	if cfg.Threshold < 0 {
		return nil, errors.New("slowlog: negative threshold")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Log{threshold: cfg.Threshold, log: cfg.Logger, counted: cfg.Counted, clock: cfg.Clock}, nil
}

// On says whether slow requests are logged (a threshold is set): only
// then are the hops of every request worth collecting. A nil *Log is off.
func (l *Log) On() bool { return l != nil && l.threshold > 0 }

// Request is what is known of one request while it is served. The
// request's handlers fill it in (Allow, SetTenant, SetSandbox, SetHops)
// before they return; the root handler reads it after (Log.End). Its
// methods do nothing on a nil *Request.
type Request struct {
	start   time.Time // on the wall clock, for the hops
	began   time.Time // on the Log's clock, for the request's duration
	allow   time.Duration
	tenant  string
	sandbox string
	hops    iter.Seq2[string, time.Duration]
	moved   atomic.Int64 // bytes of its body read and of its answer written
}

// TransferRate is the rate at which a request's own bytes (its body as
// read, its answer as written) may move before it counts as slow: a large
// upload or download takes as long as its client's link, not the
// service, so each MiB moved allows a second.
const TransferRate = 1 << 20 // bytes a second

// Moved notes n bytes of the request's body read or of its answer
// written (TransferRate).
func (q *Request) Moved(n int) {
	if q != nil && n > 0 {
		q.moved.Add(int64(n))
	}
}

// Body returns b, the request's body, counting what is read of it into q
// (Moved); b itself when q is nil or there is no body.
func (q *Request) Body(b io.ReadCloser) io.ReadCloser {
	if q == nil || b == nil || b == http.NoBody {
		return b
	}
	return &countedBody{ReadCloser: b, q: q}
}

type countedBody struct {
	io.ReadCloser
	q *Request
}

func (c *countedBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.q.Moved(n)
	return n, err
}

// Begin opens the record of a request the root handler took at start
// (time.Now()); l may be nil.
func (l *Log) Begin(start time.Time) *Request {
	q := &Request{start: start, began: start}
	if l.On() && l.clock != nil {
		q.began = l.clock()
	}
	return q
}

// Start is when the root handler took the request.
func (q *Request) Start() time.Time { return q.start }

// Allow notes a wait the caller asked for (an exec's time limit, a
// create's wait for capacity): the request is slow only beyond it and
// the threshold. The longest of several counts.
func (q *Request) Allow(d time.Duration) {
	if q != nil && d > q.allow {
		q.allow = d
	}
}

// SetTenant notes the tenant the request acts for, once it is known.
func (q *Request) SetTenant(tenant string) {
	if q != nil {
		q.tenant = tenant
	}
}

// SetSandbox notes the sandbox the request is about when its path does
// not name it (a create, a lease).
func (q *Request) SetSandbox(id string) {
	if q != nil {
		q.sandbox = id
	}
}

// SetHops gives the request its hops, the parts of its time as
// Server-Timing names them, read only if it is slow.
func (q *Request) SetHops(hops iter.Seq2[string, time.Duration]) {
	if q != nil {
		q.hops = hops
	}
}

type key struct{}

// With returns ctx carrying q.
func With(ctx context.Context, q *Request) context.Context {
	return context.WithValue(ctx, key{}, q)
}

// Of returns the Request in ctx, or nil.
func Of(ctx context.Context) *Request {
	q, _ := ctx.Value(key{}).(*Request)
	return q
}

// AllowMS is Of(ctx).Allow of ms milliseconds, as the API's bodies give
// waits, or of orElse when ms is 0 (the service's default).
func AllowMS(ctx context.Context, ms int64, orElse time.Duration) {
	if ms > 0 {
		orElse = time.Duration(ms) * time.Millisecond
	}
	Of(ctx).Allow(orElse)
}

// Streamed says whether r, answered with the header h, is long-lived by
// its form: an upgrade (WebSocket), a CONNECT, or an answer that streams
// (server-sent events, NDJSON, gRPC).
func Streamed(r *http.Request, h http.Header) bool {
	if r.Header.Get("Upgrade") != "" || r.Method == http.MethodConnect {
		return true
	}
	ct := h.Get("Content-Type")
	for _, s := range []string{"text/event-stream", "application/x-ndjson", "application/grpc"} {
		if strings.HasPrefix(ct, s) {
			return true
		}
	}
	return false
}

// ServerTiming is the value of a Server-Timing header of q's hops, in ms,
// and handler: the time from q's start to now.
func (q *Request) ServerTiming(now time.Time) string {
	var b strings.Builder
	for name, d := range q.hops {
		fmt.Fprintf(&b, "%s;dur=%.3f, ", name, ms(d))
	}
	fmt.Fprintf(&b, "handler;dur=%.3f", ms(now.Sub(q.start)))
	return b.String()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// End logs q, the request r answered with status, if it was slow, and
// says whether it was. Its route is r's pattern (the method and the
// path's pattern, as the metrics label requests), not its path: the lines
// of one route group together and the ids go into fields of their own.
// longLived marks a request that lasts as long as its caller keeps it
// (Streamed, traffic to a sandbox's own server): never slow.
func (l *Log) End(q *Request, r *http.Request, status int, requestID string, longLived bool) bool {
	if !l.On() || q == nil || longLived {
		return false
	}
	d, allow, slow := l.over(q)
	if !slow {
		return false
	}
	if strings.Contains(r.Pattern, "/sandboxes/{id}") {
		q.sandbox = r.PathValue("id")
	}
	l.write(q, d, allow, r.Pattern, requestID, slog.String("method", r.Method), slog.String("route", r.Pattern), slog.Int("status", status))
	return true
}

// EndCall is End for a unary call of the RPC edge (Connect, gRPC or
// gRPC-Web, on either listener): protocol is connect's name of it,
// procedure the call's "/<service>/<method>" (its route, as the metrics
// and the line name it) and code the gRPC code it answered with ("ok"
// for none). A streaming call is long-lived: it is never ended here.
func (l *Log) EndCall(q *Request, protocol, procedure, code, requestID string) bool {
	if !l.On() || q == nil {
		return false
	}
	d, allow, slow := l.over(q)
	if !slow {
		return false
	}
	l.write(q, d, allow, procedure, requestID, slog.String("method", protocol), slog.String("route", procedure), slog.String("code", code))
	return true
}

// Past says whether q has already lasted longer than the threshold alone:
// no wait it was allowed can make a shorter request slow, so a caller can
// leave work that only a slow request's line needs (counting the bytes of
// its messages) until this says so.
func (l *Log) Past(q *Request) bool {
	return l.On() && q != nil && l.now().Sub(q.began) > l.threshold
}

func (l *Log) now() time.Time {
	if l.clock != nil {
		return l.clock()
	}
	return time.Now()
}

// over says how long q took, what it was allowed, and whether that was
// slow.
func (l *Log) over(q *Request) (d, allow time.Duration, slow bool) {
	d = l.now().Sub(q.began)
	allow = q.allow + time.Duration(float64(q.moved.Load())/TransferRate*float64(time.Second))
	return d, allow, d > allow+l.threshold
}

// write logs the line of q, slow after d of the allow it had, beginning
// with head (what names the request: method, route and its answer), and
// counts it under route.
func (l *Log) write(q *Request, d, allow time.Duration, route, requestID string, head ...slog.Attr) {
	attrs := make([]slog.Attr, 0, 10)
	attrs = append(attrs, head...)
	attrs = append(attrs, slog.Int64("duration_ms", d.Milliseconds()), slog.String("tenant", q.tenant))
	if q.sandbox != "" {
		attrs = append(attrs, slog.String("sandbox", q.sandbox))
	}
	if requestID != "" {
		attrs = append(attrs, slog.String("request_id", requestID))
	}
	if allow >= time.Millisecond {
		attrs = append(attrs, slog.Int64("allowed_ms", allow.Milliseconds()))
	}
	if n := q.moved.Load(); n > 0 {
		attrs = append(attrs, slog.Int64("bytes", n))
	}
	if q.hops != nil {
		var hops []any
		for name, d := range q.hops {
			hops = append(hops, slog.Float64(name, math.Round(ms(d)*1000)/1000))
		}
		attrs = append(attrs, slog.Group("hops_ms", hops...))
	}
	l.log.LogAttrs(context.Background(), slog.LevelWarn, "slow request", attrs...)
	if l.counted != nil {
		l.counted(route)
	}
}
