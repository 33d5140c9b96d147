package grpcedge

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc/metadata"

	sandboxv1 "genesis.dev/sandbox/gen/genesis/sandbox/v1"
	"genesis.dev/sandbox/internal/slowlog"
	"genesis.dev/sandbox/internal/slowlog/slowlogtest"
)

// TestSlowUnaryCalls: the edge's unary calls are in the slow request log
// on either listener, with their procedure as the route, their code, the
// caller's tenant, the sandbox and the request id; the wait a call asks
// for (an exec's timeout_ms or the default exec limit, a lease's
// wait_seconds) is allowed; streaming calls are never logged. The log's
// clock moves 5 s at each reading, so every call lasts 10 s.
func TestSlowUnaryCalls(t *testing.T) {
	t.Parallel()
	e, _ := testEdge(t)
	var buf slowlogtest.Buffer
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	var counted []string
	slow, err := slowlog.New(slowlog.Config{Threshold: 2 * time.Second, Logger: slog.New(slog.NewJSONHandler(&buf, nil)),
		Counted: func(route string) { mu.Lock(); counted = append(counted, route); mu.Unlock() },
		Clock:   func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(5 * time.Second); return now }})
	if err != nil {
		t.Fatal(err)
	}
	e.slow, e.execTimeout = slow, 60*time.Second
	sandboxes, execs := edgeClients(t, e, connect.WithGRPC())
	ctx := context.Background()

	// A tenant's key acting for another tenant: refused after the key
	// check, so the line has the caller's tenant.
	req := withKeyHeader("good", &sandboxv1.DeleteSandboxRequest{Id: "sbx_1"})
	req.Header().Set("X-Genesis-Tenant", "t2")
	req.Header().Set("X-Request-Id", "req-slow-1")
	if _, err := sandboxes.DeleteSandbox(ctx, req); connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("DeleteSandbox: %v", err)
	}
	lines := buf.Lines(t)
	if len(lines) != 1 {
		t.Fatalf("log lines %v, want one slow request", lines)
	}
	want := map[string]any{"msg": "slow request", "level": "WARN", "method": "grpc", "route": "/genesis.sandbox.v1.SandboxService/DeleteSandbox",
		"code": "permission_denied", "duration_ms": float64(10000), "tenant": "t1", "sandbox": "sbx_1", "request_id": "req-slow-1"}
	for k, v := range want {
		if lines[0][k] != v {
			t.Errorf("%s = %v, want %v (line %v)", k, lines[0][k], v, lines[0])
		}
	}
	if _, ok := lines[0]["status"]; ok {
		t.Errorf("an RPC's line has an HTTP status: %v", lines[0])
	}
	if b, ok := lines[0]["bytes"].(float64); !ok || b <= 0 {
		t.Errorf("bytes %v, want the request's size", lines[0]["bytes"])
	}

	// Waits asked for are allowed: an exec's timeout, the default exec
	// limit, a lease's wait. A background job's start waits for nothing.
	for _, call := range []func() error{
		func() error {
			_, err := execs.Exec(ctx, withKeyHeader("", &sandboxv1.ExecRequest{SandboxId: "sbx_2", TimeoutMs: 30_000}))
			return err
		},
		func() error {
			_, err := execs.Exec(ctx, withKeyHeader("", &sandboxv1.ExecRequest{SandboxId: "sbx_2"}))
			return err
		},
		func() error {
			_, err := sandboxes.AcquireLease(ctx, withKeyHeader("", &sandboxv1.AcquireLeaseRequest{WaitSeconds: 20}))
			return err
		},
	} {
		if err := call(); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("want unauthenticated, got %v", err)
		}
	}
	if lines := buf.Lines(t); len(lines) != 0 {
		t.Fatalf("calls within their wait logged: %v", lines)
	}
	if _, err := execs.StartJob(ctx, withKeyHeader("", &sandboxv1.StartJobRequest{SandboxId: "sbx_3"})); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("StartJob: %v", err)
	}
	if lines := buf.Lines(t); len(lines) != 1 || lines[0]["route"] != "/genesis.sandbox.v1.ExecService/StartJob" || lines[0]["sandbox"] != "sbx_3" || lines[0]["tenant"] != "" {
		t.Fatalf("a job's start: %v", lines)
	}

	// A streaming call lasts as long as its caller keeps it: never slow.
	st := execs.WriteStdin(ctx)
	_ = st.Send(&sandboxv1.WriteStdinRequest{JobId: "job_1", Data: []byte("x")})
	if _, err := st.CloseAndReceive(); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("WriteStdin: %v", err)
	}
	if lines := buf.Lines(t); len(lines) != 0 {
		t.Fatalf("a stream logged: %v", lines)
	}

	// The native listener's unary calls are logged the same way.
	cc := nativeClient(t, e)
	nctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer wrong")
	if err := cc.Invoke(nctx, "/genesis.sandbox.v1.SandboxService/GetSandbox", &sandboxv1.GetSandboxRequest{Id: "sbx_4"}, &sandboxv1.Sandbox{}); err == nil {
		t.Fatal("GetSandbox with a wrong key answered")
	}
	lines = buf.Lines(t)
	if len(lines) != 1 || lines[0]["method"] != "grpc" || lines[0]["route"] != "/genesis.sandbox.v1.SandboxService/GetSandbox" ||
		lines[0]["code"] != "unauthenticated" || lines[0]["sandbox"] != "sbx_4" {
		t.Fatalf("a native call: %v", lines)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(counted, " ") != "/genesis.sandbox.v1.SandboxService/DeleteSandbox /genesis.sandbox.v1.ExecService/StartJob /genesis.sandbox.v1.SandboxService/GetSandbox" {
		t.Fatalf("counted %q", counted)
	}
}
