package mcp_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/mcp"
)

var fixture string // the built test/mcpfixture

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mcpfixture")
	if err != nil {
		panic(err)
	}
	fixture = filepath.Join(dir, "mcpfixture")
	out, err := exec.Command("go", "build", "-o", fixture, "genesis.dev/sandbox/test/mcpfixture").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building the fixture: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuffer is a buffer safe for a process's writes and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// backend is a fixture process.
type backend struct {
	cmd    *exec.Cmd
	stdio  *mcp.Stdio
	stderr *syncBuffer
	mu     sync.Mutex
	killed string
}

func startBackend(t *testing.T, mode string, maxLine int) *backend {
	t.Helper()
	b := &backend{cmd: exec.Command(fixture, mode), stderr: &syncBuffer{}}
	b.cmd.Stderr = b.stderr
	stdin, err := b.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := b.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	b.stdio = mcp.NewStdio(stdout, stdin, maxLine, func(reason string) {
		b.mu.Lock()
		b.killed = reason
		b.mu.Unlock()
		_ = b.cmd.Process.Kill()
	})
	t.Cleanup(func() {
		_ = b.cmd.Process.Kill()
		_ = b.cmd.Wait()
	})
	return b
}

func (b *backend) killReason() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.killed
}

type setup struct {
	b     *backend
	p     *mcp.Proxy
	url   string
	mu    sync.Mutex
	calls []mcp.CallRecord
}

func newSetup(t *testing.T, mode string, cfg mcp.Config) *setup {
	t.Helper()
	s := &setup{b: startBackend(t, mode, 0)}
	cfg.Backend = s.b.stdio
	cfg.OnCall = func(r mcp.CallRecord) {
		s.mu.Lock()
		s.calls = append(s.calls, r)
		s.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := mcp.Connect(ctx, cfg)
	if err != nil {
		t.Fatalf("connect: %v (stderr %s)", err, s.b.stderr)
	}
	t.Cleanup(func() { p.Close() })
	s.p = p
	srv := httptest.NewServer(p.Handler())
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

func (s *setup) records() []mcp.CallRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]mcp.CallRecord(nil), s.calls...)
}

func connect(t *testing.T, url string, version string, opts *sdk.ClientOptions, hc *http.Client) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "test-client", Version: "9"}, opts)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: 3},
		&sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("client connect (%s): %v", version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func textOf(t *testing.T, res *sdk.CallToolResult) string {
	t.Helper()
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "")
}

func ctx10(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func toolNames(tools []*sdk.Tool) []string {
	var n []string
	for _, tl := range tools {
		n = append(n, tl.Name)
	}
	return n
}

func TestListAndCallBothProtocolVersions(t *testing.T) {
	s := newSetup(t, "serve", mcp.Config{})
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(v, func(t *testing.T) {
			cs := connect(t, s.url, v, nil, nil)
			if got := cs.InitializeResult().ProtocolVersion; got != v {
				t.Fatalf("negotiated %s, want %s", got, v)
			}
			if got := cs.InitializeResult().ServerInfo.Name; got != "mcpfixture" {
				t.Errorf("server name %q, want the backend's", got)
			}
			lt, err := cs.ListTools(ctx10(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			if names := strings.Join(toolNames(lt.Tools), ","); !strings.Contains(names, "echo") || !strings.Contains(names, "slow") {
				t.Fatalf("tools %s", names)
			}
			res, err := cs.CallTool(ctx10(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi " + v}})
			if err != nil {
				t.Fatal(err)
			}
			if got := textOf(t, res); got != "echo: hi "+v {
				t.Fatalf("echo answered %q", got)
			}
			rr, err := cs.ReadResource(ctx10(t), &sdk.ReadResourceParams{URI: "fixture://readme"})
			if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "the fixture's readme" {
				t.Fatalf("read resource: %+v %v", rr, err)
			}
		})
	}
	recs := s.records()
	var echo int
	for _, r := range recs {
		if r.Method == "tools/call" && r.Tool == "echo" && r.Outcome == mcp.OutcomeOK && r.Decision == "allowed" &&
			strings.HasPrefix(r.ArgsDigest, "sha256:") && r.Client == "test-client/9" && r.ResultBytes > 0 {
			echo++
		}
	}
	if echo != 2 {
		t.Fatalf("want 2 audited echo calls, got %+v", recs)
	}
}

// Two clients whose JSON-RPC ids are the same (each numbers from 1) call
// concurrently: each gets its own answers.
func TestConcurrentClientsWithTheSameIDs(t *testing.T) {
	s := newSetup(t, "serve", mcp.Config{})
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for c := range 2 {
		cs := connect(t, s.url, "2025-11-25", nil, nil)
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				want := fmt.Sprintf("client %d call %d", c, i)
				res, err := cs.CallTool(ctx10(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": want}})
				if err != nil {
					errs <- err
					return
				}
				if got := textOf(t, res); got != "echo: "+want {
					errs <- fmt.Errorf("asked %q, got %q", want, got)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestProgressResetsTheTimeoutAndIsForwarded(t *testing.T) {
	// The timeout is ten steps long: a loaded host may hold a process for a
	// few hundred milliseconds, and progress must still come within it.
	s := newSetup(t, "serve", mcp.Config{CallTimeout: 1500 * time.Millisecond, CallCeiling: 10 * time.Second})
	var mu sync.Mutex
	var got []float64
	var tokens []any
	cs := connect(t, s.url, "2025-11-25", &sdk.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
		mu.Lock()
		got = append(got, r.Params.Progress)
		tokens = append(tokens, r.Params.ProgressToken)
		mu.Unlock()
	}}, nil)
	// 12 steps of 150 ms: 1.8 s in all, longer than the timeout, but
	// progress comes well within each timeout.
	params := &sdk.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 12, "step_ms": 150}}
	params.SetProgressToken("client-token")
	res, err := cs.CallTool(ctx10(t), params)
	if err != nil {
		t.Fatal(err)
	}
	if textOf(t, res) != "done after 12 steps" {
		t.Fatalf("answer %q", textOf(t, res))
	}
	// The SDK client hands notifications to the handler apart from
	// answers, so the last may reach it after the answer.
	waitFor(t, "twelve progress notifications", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= 12 })
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(got) != "[1 2 3 4 5 6 7 8 9 10 11 12]" {
		t.Fatalf("progress %v", got)
	}
	for _, tk := range tokens {
		if tk != "client-token" {
			t.Fatalf("progress token %v reached the client, want its own", tk)
		}
	}
}

func TestTimeoutsCancelAtTheBackend(t *testing.T) {
	// Progress every 100 ms against a 1.5 s timeout: a loaded host holding
	// the backend a few hundred milliseconds (it did, at 300 ms) must not
	// end the ceiling case by the timeout instead.
	s := newSetup(t, "serve", mcp.Config{CallTimeout: 1500 * time.Millisecond, CallCeiling: 3 * time.Second})
	cs := connect(t, s.url, "2025-11-25", nil, nil)
	cases := []struct {
		name string
		args map[string]any
		want string
	}{
		{"no progress", map[string]any{"steps": 1, "step_ms": 20000}, "no answer and no progress for 1.5s"},
		// progress every 100 ms keeps it alive, but the ceiling ends it
		{"ceiling", map[string]any{"steps": 100, "step_ms": 100}, "past its ceiling of 3s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := strings.Count(s.b.stderr.String(), "cancelled slow")
			p := &sdk.CallToolParams{Name: "slow", Arguments: tc.args}
			p.SetProgressToken(1)
			_, err := cs.CallTool(ctx10(t), p)
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != -32001 || !strings.Contains(je.Message, tc.want) {
				t.Fatalf("want a -32001 timeout saying %q, got %v", tc.want, err)
			}
			waitFor(t, "the backend to see the cancel", func() bool {
				return strings.Count(s.b.stderr.String(), "cancelled slow") > before
			})
		})
	}
	// The instance still works.
	if res, err := cs.CallTool(ctx10(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "after"}}); err != nil || textOf(t, res) != "echo: after" {
		t.Fatalf("echo after timeouts: %v", err)
	}
	var timeouts int
	for _, r := range s.records() {
		if r.Outcome == mcp.OutcomeTimeout {
			timeouts++
		}
	}
	if timeouts != 2 {
		t.Fatalf("want 2 audited timeouts, got %+v", s.records())
	}
}

func TestClientCancelReachesTheBackend(t *testing.T) {
	s := newSetup(t, "serve", mcp.Config{})
	cs := connect(t, s.url, "2025-11-25", nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 1, "step_ms": 20000}})
	if err == nil {
		t.Fatal("a cancelled call answered")
	}
	waitFor(t, "the backend to see the cancel", func() bool { return strings.Contains(s.b.stderr.String(), "cancelled slow") })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDeniedToolIsIndistinguishableFromAMissingOne(t *testing.T) {
	pol, err := mcp.NewPolicy(mcp.Rules{Deny: []string{"fa*"}}, mcp.PinBlock, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := newSetup(t, "serve", mcp.Config{Policy: pol})
	cs := connect(t, s.url, "2025-11-25", nil, nil)
	lt, err := cs.ListTools(ctx10(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.Join(toolNames(lt.Tools), ","), "fail") {
		t.Fatalf("a denied tool is listed: %v", toolNames(lt.Tools))
	}
	_, denied := cs.CallTool(ctx10(t), &sdk.CallToolParams{Name: "fail"})
	_, missing := cs.CallTool(ctx10(t), &sdk.CallToolParams{Name: "nosuch"})
	if denied == nil || missing == nil {
		t.Fatalf("denied %v, missing %v", denied, missing)
	}
	if a, b := strings.ReplaceAll(denied.Error(), "fail", "X"), strings.ReplaceAll(missing.Error(), "nosuch", "X"); a != b {
		t.Fatalf("denied answers %q, missing %q", denied, missing)
	}
	if strings.Contains(s.b.stderr.String(), "it failed") {
		t.Fatal("the denied call reached the server")
	}
	for _, r := range s.records() {
		if r.Tool == "fail" && (r.Decision != "hidden" || r.Rule != "deny fa*") {
			t.Fatalf("denied call recorded as %+v", r)
		}
	}
}

func TestArgumentsAreValidatedAgainstTheSchema(t *testing.T) {
	s := newSetup(t, "serve", mcp.Config{})
	cs := connect(t, s.url, "2025-11-25", nil, nil)
	res, err := cs.CallTool(ctx10(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": 5}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(textOf(t, res), "do not match its inputSchema") {
		t.Fatalf("bad arguments answered %+v", res)
	}
	if strings.Contains(s.b.stderr.String(), "called echo") {
		t.Fatal("a call with bad arguments reached the server")
	}
}

func TestRugPullIsBlockedUntilApproved(t *testing.T) {
	var mu sync.Mutex
	var events []mcp.Pin
	pol, err := mcp.NewPolicy(mcp.Rules{}, mcp.PinBlock, nil, nil, func(p mcp.Pin) {
		mu.Lock()
		events = append(events, p)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	s := newSetup(t, "rugpull", mcp.Config{Policy: pol})
	cs := connect(t, s.url, "2025-11-25", nil, nil)
	first, err := cs.ListTools(ctx10(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(toolNames(first.Tools), ","), "echo") {
		t.Fatal("echo not listed at first")
	}
	second, err := cs.ListTools(ctx10(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range second.Tools {
		if tl.Name == "echo" {
			t.Fatalf("the changed echo is listed: %q", tl.Description)
		}
	}
	res, err := cs.CallTool(ctx10(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(textOf(t, res), "changed its definition") {
		t.Fatalf("a call of the changed tool answered %q", textOf(t, res))
	}
	var pin mcp.Pin
	for _, p := range pol.Pins() {
		if p.Tool == "echo" {
			pin = p
		}
	}
	if pin.Changed == nil || !pin.Changed.Blocked || !strings.Contains(string(pin.Changed.Definition), "id_rsa") ||
		strings.Contains(string(pin.Definition), "id_rsa") {
		t.Fatalf("pin %+v", pin)
	}
	if _, err := pol.Approve("echo", "sha256:0000"); err == nil {
		t.Fatal("an approval of another hash passed")
	}
	if _, err := pol.Approve("echo", pin.Changed.Hash); err != nil {
		t.Fatal(err)
	}
	res, err = cs.CallTool(ctx10(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
	if err != nil || res.IsError || textOf(t, res) != "echo: x" {
		t.Fatalf("after approval: %+v %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) < 3 { // echo pinned (with the others), changed, approved
		t.Fatalf("pin events %+v", events)
	}
}

func TestBreachesKillTheServer(t *testing.T) {
	cases := []struct {
		tool, why string
		args      map[string]any
		maxLine   int
	}{
		{"spew", "not JSON", nil, 0},
		{"long", "longer than 4096 bytes", map[string]any{"bytes": 10000}, 4096},
	}
	for _, tc := range cases {
		t.Run(tc.tool, func(t *testing.T) {
			b := startBackend(t, "serve", tc.maxLine)
			p, err := mcp.Connect(ctx10(t), mcp.Config{Backend: b.stdio})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			srv := httptest.NewServer(p.Handler())
			t.Cleanup(srv.Close)
			cs := connect(t, srv.URL, "2025-11-25", nil, nil)
			_, err = cs.CallTool(ctx10(t), &sdk.CallToolParams{Name: tc.tool, Arguments: tc.args})
			if err == nil {
				t.Fatal("the call answered")
			}
			if !strings.Contains(b.killReason(), tc.why) || !errors.Is(b.stdio.Breach(), mcp.ErrProtocol) {
				t.Fatalf("kill reason %q, breach %v", b.killReason(), b.stdio.Breach())
			}
			select {
			case <-p.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the proxy did not end with its backend")
			}
		})
	}
}

func TestServersThatNeverInitialize(t *testing.T) {
	for _, mode := range []string{"exit", "noinit"} {
		t.Run(mode, func(t *testing.T) {
			b := startBackend(t, mode, 0)
			start := time.Now()
			_, err := mcp.Connect(ctx10(t), mcp.Config{Backend: b.stdio, InitTimeout: 500 * time.Millisecond})
			if err == nil {
				t.Fatal("connected")
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("took %s", time.Since(start))
			}
		})
	}
}

func TestForeignOriginIsRefused(t *testing.T) {
	s := newSetup(t, "serve", mcp.Config{AllowedOrigins: []string{"https://console.example"}})
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`
	for origin, want := range map[string]int{"https://evil.example": 403, "https://console.example": 200, "": 200} {
		req, _ := http.NewRequest("POST", s.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("origin %q: %d, want %d", origin, resp.StatusCode, want)
		}
	}
}

// cutOnce cuts the first event stream that carries a progress event, right
// after that event, as a dropped connection would.
type cutOnce struct {
	mu  sync.Mutex
	cut bool
}

func (c *cutOnce) cutNow() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := !c.cut
	c.cut = true
	return first
}

func (c *cutOnce) wasCut() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cut
}

func (c *cutOnce) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || r.Method != http.MethodPost {
		return resp, err
	}
	pr, pw := io.Pipe()
	body := resp.Body
	go func() {
		defer body.Close()
		br := bufio.NewReader(body)
		var event strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				pw.CloseWithError(err)
				return
			}
			event.WriteString(line)
			if line == "\n" {
				if _, err := io.WriteString(pw, event.String()); err != nil {
					return
				}
				if strings.Contains(event.String(), `"progress":2`) && c.cutNow() {
					pw.CloseWithError(io.ErrUnexpectedEOF) // the connection drops
					return
				}
				event.Reset()
			}
		}
	}()
	resp.Body = pr
	return resp, nil
}

func TestDroppedStreamResumesWithoutGapOrDuplicate(t *testing.T) {
	s := newSetup(t, "serve", mcp.Config{})
	cut := &cutOnce{}
	var mu sync.Mutex
	var got []float64
	cs := connect(t, s.url, "2025-11-25", &sdk.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) {
		mu.Lock()
		got = append(got, r.Params.Progress)
		mu.Unlock()
	}}, &http.Client{Transport: cut})
	p := &sdk.CallToolParams{Name: "slow", Arguments: map[string]any{"steps": 5, "step_ms": 100}}
	p.SetProgressToken("t")
	res, err := cs.CallTool(ctx10(t), p)
	if err != nil {
		t.Fatal(err)
	}
	if textOf(t, res) != "done after 5 steps" {
		t.Fatalf("answer %q", textOf(t, res))
	}
	if !cut.wasCut() {
		t.Fatal("the stream was never cut")
	}
	waitFor(t, "five progress notifications", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= 5 })
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(got) != "[1 2 3 4 5]" {
		t.Fatalf("progress after a resume %v, want each step once", got)
	}
	if strings.Count(s.b.stderr.String(), "cancelled slow") != 0 {
		t.Fatal("the drop cancelled the call")
	}
}

// fakeApprover answers held calls from a channel of decisions.
type fakeApprover struct {
	seen      chan mcp.ApprovalRequest
	decisions chan error
}

func (f fakeApprover) Approve(ctx context.Context, req mcp.ApprovalRequest) (string, error) {
	f.seen <- req
	select {
	case err := <-f.decisions:
		return "reviewer", err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func TestHeldCallsWaitForTheirApproval(t *testing.T) {
	pol, err := mcp.NewPolicy(mcp.Rules{Approve: []string{"echo"}}, mcp.PinBlock, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ap := fakeApprover{seen: make(chan mcp.ApprovalRequest, 1), decisions: make(chan error, 1)}
	s := newSetup(t, "serve", mcp.Config{Policy: pol, Approver: ap})
	cs := connect(t, s.url, "2025-11-25", nil, nil)
	for _, tc := range []struct {
		decision error
		want     string
	}{{nil, "echo: held"}, {errors.New("not today"), "not today"}} {
		type answer struct {
			res *sdk.CallToolResult
			err error
		}
		done := make(chan answer, 1)
		go func() {
			res, err := cs.CallTool(ctx10(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "held"}})
			done <- answer{res, err}
		}()
		req := <-ap.seen
		if req.Tool != "echo" || !strings.HasPrefix(req.ArgsDigest, "sha256:") || !strings.Contains(string(req.Args), "held") {
			t.Fatalf("approval request %+v", req)
		}
		select {
		case a := <-done:
			t.Fatalf("the call answered before its decision: %+v", a)
		case <-time.After(100 * time.Millisecond):
		}
		calledBefore := strings.Count(s.b.stderr.String(), "called echo")
		ap.decisions <- tc.decision
		a := <-done
		if a.err != nil || !strings.Contains(textOf(t, a.res), tc.want) || a.res.IsError != (tc.decision != nil) {
			t.Fatalf("decision %v: answer %+v %v", tc.decision, a.res, a.err)
		}
		if tc.decision == nil {
			// the server's stderr is copied apart from its answer
			waitFor(t, "the approved call at the server", func() bool { return strings.Count(s.b.stderr.String(), "called echo") > calledBefore })
		} else if strings.Count(s.b.stderr.String(), "called echo") > calledBefore {
			t.Fatalf("a denied call reached the server")
		}
	}
}

// TestGateRefusesCallsWhilePaused: while the gate refuses (the sandbox's
// agent is paused), a tool call answers a tool error naming the state,
// never reaches the server and is recorded as refused; once the gate lets
// calls through, the same call runs.
func TestGateRefusesCallsWhilePaused(t *testing.T) {
	pol, err := mcp.NewPolicy(mcp.Rules{}, mcp.PinBlock, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var paused atomic.Bool
	paused.Store(true)
	gate := func(context.Context) error {
		if paused.Load() {
			return errdefs.WithCode("paused", fmt.Errorf("the agent is paused: %w", errdefs.ErrConflict))
		}
		return nil
	}
	s := newSetup(t, "serve", mcp.Config{Policy: pol, Gate: gate})
	cs := connect(t, s.url, "2025-11-25", nil, nil)
	res, err := cs.CallTool(ctx10(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "while paused"}})
	if err != nil || !res.IsError || !strings.Contains(textOf(t, res), "paused") {
		t.Fatalf("a call while paused: %+v %v", res, err)
	}
	if strings.Contains(s.b.stderr.String(), "called echo") {
		t.Fatal("a call while paused reached the server")
	}
	recs := s.records()
	if len(recs) != 1 || recs[0].Decision != "refused" || recs[0].Rule != "interrupt: paused" {
		t.Fatalf("records %+v", recs)
	}
	paused.Store(false)
	res, err = cs.CallTool(ctx10(t), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "resumed"}})
	if err != nil || res.IsError || !strings.Contains(textOf(t, res), "resumed") {
		t.Fatalf("a call after resume: %+v %v", res, err)
	}
}
