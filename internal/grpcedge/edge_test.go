package grpcedge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	sandboxv1 "genesis.dev/sandbox/gen/genesis/sandbox/v1"
	"genesis.dev/sandbox/gen/genesis/sandbox/v1/sandboxv1connect"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/tenant"
)

func TestHandlesOnlyTheEdgesPaths(t *testing.T) {
	t.Parallel()
	e, _ := testEdge(t)
	for path, want := range map[string]bool{
		"/genesis.sandbox.v1.SandboxService/GetSandbox":                  true,
		"/genesis.sandbox.v1.ExecService/StreamJobLogs":                  true,
		"/grpc.health.v1.Health/Check":                                   true,
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo":      true,
		"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": true,
		"/v1/sandboxes":              false,
		"/healthz":                   false,
		"/e2b/sandboxes":             false,
		"/genesis.sandbox.v1.Other/": false,
		"/":                          false,
	} {
		r := httptest.NewRequest(http.MethodPost, path, nil)
		if got := e.Handles(r); got != want {
			t.Errorf("Handles(POST %s) = %v, want %v", path, got, want)
		}
	}
	// Anything else reaches the HTTP API unchanged, and so does every
	// request for a preview host (a sandbox's own gRPC server's paths).
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	isPreview := func(r *http.Request) bool { return strings.HasPrefix(r.Host, "8080-sbx") }
	route := e.Route(next, isPreview)
	for _, tc := range []struct {
		host, path string
		edge       bool
	}{
		{"api.example", "/v1/sandboxes", false},
		{"api.example", "/grpc.health.v1.Health/Check", true},
		{"8080-sbx1.example", "/grpc.health.v1.Health/Check", false},
		{"8080-sbx1.example", "/genesis.sandbox.v1.SandboxService/ListProfiles", false},
	} {
		r := httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader("{}"))
		r.Host = tc.host
		r.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		route.ServeHTTP(rec, r)
		if got := rec.Code != http.StatusTeapot; got != tc.edge {
			t.Errorf("POST %s%s: %d, to the edge: %v, want %v", tc.host, tc.path, rec.Code, got, tc.edge)
		}
	}
}

// connectError is err's *connect.Error and its ErrorInfo detail.
func connectError(t *testing.T, err error) (*connect.Error, *errdetails.ErrorInfo) {
	t.Helper()
	var ce *connect.Error
	if !errors.As(err, &ce) {
		t.Fatalf("%v is no connect error", err)
	}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if derr != nil {
			t.Fatal(derr)
		}
		if info, ok := v.(*errdetails.ErrorInfo); ok {
			return ce, info
		}
	}
	return ce, nil
}

func TestErrorsFromTheClassTable(t *testing.T) {
	t.Parallel()
	e, _ := testEdge(t)
	ctx := context.WithValue(context.Background(), requestIDKey, "req_test")
	for _, tc := range []struct {
		err    error
		code   connect.Code
		reason string
		msg    string
	}{
		{errdefs.WithCode("sandbox_not_running", fmt.Errorf("sandbox x is paused: %w", errdefs.ErrFailedPrecondition)), connect.CodeFailedPrecondition, "sandbox_not_running", "sandbox x is paused"},
		{fmt.Errorf("sandbox x: %w", errdefs.ErrNotFound), connect.CodeNotFound, "not_found", "sandbox x"},
		{fmt.Errorf("stale: %w", errdefs.ErrPreconditionFailed), connect.CodeFailedPrecondition, "precondition_failed", "stale"},
		{fmt.Errorf("busy: %w", errdefs.ErrConflict), connect.CodeAborted, "conflict", "busy"},
		{fmt.Errorf("no: %w", errdefs.ErrUnauthenticated), connect.CodeUnauthenticated, "unauthenticated", "no"},
		{context.Canceled, connect.CodeCanceled, "client_closed", "context canceled"},
		{errors.New("disk on fire at /secret/path"), connect.CodeInternal, "internal", "internal error; see the service log for request req_test"},
	} {
		ce, info := connectError(t, e.toConnect(ctx, tc.err))
		if ce.Code() != tc.code || info == nil || info.Reason != tc.reason || info.Domain != ErrorDomain || info.Metadata[MetaRequestID] != "req_test" {
			t.Errorf("%v: %v %v", tc.err, ce.Code(), info)
		}
		if !strings.Contains(ce.Message(), tc.msg) || (tc.code == connect.CodeInternal && strings.Contains(ce.Message(), "secret")) {
			t.Errorf("%v: message %q", tc.err, ce.Message())
		}
	}
	// Retry-After: the error's own, else the class's default.
	for _, tc := range []struct {
		err  error
		want time.Duration
	}{
		{errdefs.WithRetryAfter(7*time.Second, fmt.Errorf("full: %w", errdefs.ErrUnavailable)), 7 * time.Second},
		{fmt.Errorf("quota: %w", errdefs.ErrResourceExhausted), 5 * time.Second},
	} {
		ce, _ := connectError(t, e.toConnect(ctx, tc.err))
		var got time.Duration
		for _, d := range ce.Details() {
			if v, _ := d.Value(); v != nil {
				if ri, ok := v.(*errdetails.RetryInfo); ok {
					got = ri.RetryDelay.AsDuration()
				}
			}
		}
		if got != tc.want {
			t.Errorf("%v: RetryInfo %v, want %v", tc.err, got, tc.want)
		}
	}
}

// edgeClients serve e over an httptest server speaking HTTP/2 in
// cleartext (h2c, as the service's listener), called as docs/grpc.md's Go
// example calls it.
func edgeClients(t *testing.T, e *Edge, opts ...connect.ClientOption) (sandboxv1connect.SandboxServiceClient, sandboxv1connect.ExecServiceClient) {
	t.Helper()
	srv := httptest.NewUnstartedServer(e.Handler())
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: protocols}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	return sandboxv1connect.NewSandboxServiceClient(hc, srv.URL, opts...),
		sandboxv1connect.NewExecServiceClient(hc, srv.URL, opts...)
}

func withKeyHeader[T any](key string, m *T) *connect.Request[T] {
	req := connect.NewRequest(m)
	if key != "" {
		req.Header().Set("Authorization", "Bearer "+key)
	}
	return req
}

func TestKeysAndAudit(t *testing.T) {
	t.Parallel()
	e, ft := testEdge(t)
	sandboxes, execs := edgeClients(t, e, connect.WithGRPC())
	ctx := context.Background()

	// No key, a wrong key: UNAUTHENTICATED before any work; a mutating
	// call is audited as anonymous with the HTTP API's 401.
	for _, key := range []string{"", "wrong"} {
		_, err := sandboxes.DeleteSandbox(ctx, withKeyHeader(key, &sandboxv1.DeleteSandboxRequest{Id: "sbx_1"}))
		ce, info := connectError(t, err)
		if ce.Code() != connect.CodeUnauthenticated || info == nil || info.Reason != "unauthenticated" || info.Metadata[MetaRequestID] == "" {
			t.Fatalf("key %q: %v %v", key, err, info)
		}
		if ce.Meta().Get("X-Request-Id") != info.Metadata[MetaRequestID] {
			t.Fatalf("request id in metadata %q, in ErrorInfo %q", ce.Meta().Get("X-Request-Id"), info.Metadata[MetaRequestID])
		}
	}
	recs := ft.audit()
	if len(recs) != 2 {
		t.Fatalf("audit records %v, want 2", recs)
	}
	for _, r := range recs {
		if r.Actor != tenant.ActorAnonymous || r.Action != "RPC /genesis.sandbox.v1.SandboxService/DeleteSandbox" ||
			r.Status != http.StatusUnauthorized || r.Code != "unauthenticated" || r.Target != "sbx_1" || r.RequestID == "" {
			t.Fatalf("audit record %+v", r)
		}
	}
	// A read is not audited.
	_, err := sandboxes.GetSandbox(ctx, withKeyHeader("", &sandboxv1.GetSandboxRequest{Id: "sbx_1"}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated || len(ft.audit()) != 2 {
		t.Fatalf("GetSandbox without a key: %v; %d audit records", err, len(ft.audit()))
	}
	// A streaming call checks the key too.
	st := execs.WriteStdin(ctx)
	_ = st.Send(&sandboxv1.WriteStdinRequest{JobId: "job_1", Data: []byte("x")})
	_, err = st.CloseAndReceive()
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("WriteStdin without a key: %v", err)
	}
	// Acting for another tenant needs an admin key, and a tenant that
	// exists.
	req := withKeyHeader("good", &sandboxv1.DeleteSandboxRequest{Id: "sbx_1"})
	req.Header().Set("X-Genesis-Tenant", "t2")
	_, err = sandboxes.DeleteSandbox(ctx, req)
	if ce, info := connectError(t, err); ce.Code() != connect.CodePermissionDenied || info.Reason != "admin_required" {
		t.Fatalf("a tenant key acting for another: %v", err)
	}
	req = withKeyHeader("admin", &sandboxv1.DeleteSandboxRequest{Id: "sbx_1"})
	req.Header().Set("X-Genesis-Tenant", "nobody")
	_, err = sandboxes.DeleteSandbox(ctx, req)
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("an admin acting for a tenant that does not exist: %v", err)
	}
}

func TestMessagesAreBounded(t *testing.T) {
	t.Parallel()
	e, ft := testEdge(t) // 1 KiB
	_, execs := edgeClients(t, e, connect.WithGRPC())
	_, err := execs.Exec(context.Background(), withKeyHeader("good", &sandboxv1.ExecRequest{SandboxId: "sbx_1", Stdin: make([]byte, 4<<10)}))
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("a 4 KiB message to a 1 KiB edge: %v", err)
	}
	if n := len(ft.audit()); n != 0 {
		t.Fatalf("a refused message reached the handler: %d audit records", n)
	}
}

// TestJSONRefusesUnknownFields: a Connect-JSON call with a field the
// message does not have is INVALID_ARGUMENT before any work, as the HTTP
// API's 400.
func TestJSONRefusesUnknownFields(t *testing.T) {
	t.Parallel()
	e, ft := testEdge(t)
	srv := httptest.NewServer(e.Handler())
	t.Cleanup(srv.Close)
	for _, ct := range []string{"application/json", "application/json; charset=utf-8"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/genesis.sandbox.v1.SandboxService/DeleteSandbox", strings.NewReader(`{"id":"sbx_1","sandbx":"typo"}`))
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Authorization", "Bearer good")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Code, Message string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || body.Code != "invalid_argument" || !strings.Contains(body.Message, "sandbx") {
			t.Fatalf("%s with an unknown field: %d %+v", ct, resp.StatusCode, body)
		}
	}
	if n := len(ft.audit()); n != 0 {
		t.Fatalf("a refused call reached the handler: %d audit records", n)
	}
}

// rpcRecorder is an RPCObserver that keeps what it saw.
type rpcRecorder struct {
	mu    sync.Mutex
	calls []string // "service method code"
}

func (r *rpcRecorder) ObserveRPC(service, method, code string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d <= 0 {
		code += " (no duration)"
	}
	r.calls = append(r.calls, service+" "+method+" "+code)
}

// TestCallsAreObserved: every call of a service, unary or streaming,
// refused or not, reaches the metrics once with its service, method and
// code.
func TestCallsAreObserved(t *testing.T) {
	t.Parallel()
	e, _ := testEdge(t)
	rec := &rpcRecorder{}
	e.metrics = rec
	sandboxes, execs := edgeClients(t, e, connect.WithGRPC())
	ctx := context.Background()
	_, _ = sandboxes.GetSandbox(ctx, withKeyHeader("", &sandboxv1.GetSandboxRequest{Id: "sbx_1"}))
	_, _ = sandboxes.DeleteSandbox(ctx, withKeyHeader("wrong", &sandboxv1.DeleteSandboxRequest{Id: "sbx_1"}))
	st := execs.WriteStdin(ctx)
	_ = st.Send(&sandboxv1.WriteStdinRequest{JobId: "job_1", Data: []byte("x")})
	_, _ = st.CloseAndReceive()
	want := []string{
		"genesis.sandbox.v1.SandboxService GetSandbox unauthenticated",
		"genesis.sandbox.v1.SandboxService DeleteSandbox unauthenticated",
		"genesis.sandbox.v1.ExecService WriteStdin unauthenticated",
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !slices.Equal(rec.calls, want) {
		t.Fatalf("observed %q, want %q", rec.calls, want)
	}
}
