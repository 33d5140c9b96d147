package grpcedge

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	sandboxv1 "genesis.dev/sandbox/gen/genesis/sandbox/v1"
	"genesis.dev/sandbox/internal/tenant"
)

// nativeClient serves e's NativeServer on a loopback port and dials it
// with grpc-go's client.
func nativeClient(t testing.TB, e *Edge) *grpc.ClientConn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := e.NativeServer()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return dial(t, ln.Addr().String())
}

func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// grpcErrorInfo is the ErrorInfo detail of a grpc-go status error.
func grpcErrorInfo(err error) *errdetails.ErrorInfo {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

// TestNativeServerServesTheEdge: a grpc-go client of the native listener
// meets the edge's own handlers: health, reflection, the key check with
// its ErrorInfo and request id, the audit with the caller's address, the
// message bound, streams, and UNIMPLEMENTED for a path of no service.
func TestNativeServerServesTheEdge(t *testing.T) {
	t.Parallel()
	e, ft := testEdge(t)
	cc := nativeClient(t, e)
	ctx := context.Background()

	hres, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hres.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", hres, err)
	}
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: "nope.Nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("health of an unknown service: %v", err)
	}
	// A gzip-compressed call is taken, as on the API listener.
	hres, err = healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}, grpc.UseCompressor(gzip.Name))
	if err != nil || hres.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health, gzip: %v %v", hres, err)
	}

	rs, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rs.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	rres, err := rs.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range rres.GetListServicesResponse().GetService() {
		names = append(names, s.Name)
	}
	if !slices.Contains(names, "genesis.sandbox.v1.ExecService") || !slices.Contains(names, "grpc.health.v1.Health") {
		t.Fatalf("reflection lists %v", names)
	}
	_ = rs.CloseSend()

	// A wrong key: UNAUTHENTICATED with the ErrorInfo and the request id
	// (header metadata and detail agree), audited with the peer address.
	var header, trailer metadata.MD
	kctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer wrong", "x-request-id", "req-native-1")
	var res sandboxv1.DeleteSandboxResponse
	err = cc.Invoke(kctx, "/genesis.sandbox.v1.SandboxService/DeleteSandbox", &sandboxv1.DeleteSandboxRequest{Id: "sbx_1"}, &res, grpc.Header(&header), grpc.Trailer(&trailer))
	info := grpcErrorInfo(err)
	if status.Code(err) != codes.Unauthenticated || info == nil || info.Reason != "unauthenticated" || info.Metadata[MetaRequestID] != "req-native-1" {
		t.Fatalf("a wrong key: %v %v", err, info)
	}
	// An error's metadata is trailer metadata, as on the main listener.
	if got := append(header.Get("x-request-id"), trailer.Get("x-request-id")...); len(got) != 1 || got[0] != "req-native-1" {
		t.Fatalf("x-request-id metadata %v", got)
	}
	recs := ft.audit()
	if len(recs) != 1 || recs[0].Actor != tenant.ActorAnonymous || recs[0].Target != "sbx_1" || recs[0].Code != "unauthenticated" ||
		!strings.HasPrefix(recs[0].Remote, "127.0.0.1:") {
		t.Fatalf("audit %+v", recs)
	}

	// Acting for another tenant with a tenant key: PERMISSION_DENIED.
	actx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer good", "x-genesis-tenant", "t2")
	err = cc.Invoke(actx, "/genesis.sandbox.v1.SandboxService/DeleteSandbox", &sandboxv1.DeleteSandboxRequest{Id: "sbx_1"}, &res)
	if info := grpcErrorInfo(err); status.Code(err) != codes.PermissionDenied || info == nil || info.Reason != "admin_required" {
		t.Fatalf("a tenant key acting for another: %v", err)
	}

	// A message over the bound (1 KiB here): RESOURCE_EXHAUSTED, no work.
	n := len(ft.audit())
	var er sandboxv1.ExecResult
	err = cc.Invoke(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer good"), "/genesis.sandbox.v1.ExecService/Exec",
		&sandboxv1.ExecRequest{SandboxId: "sbx_1", Stdin: make([]byte, 4<<10)}, &er)
	if status.Code(err) != codes.ResourceExhausted || len(ft.audit()) != n {
		t.Fatalf("a 4 KiB message to a 1 KiB edge: %v (%d audit records, was %d)", err, len(ft.audit()), n)
	}

	// A client stream checks the key too.
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, "/genesis.sandbox.v1.ExecService/WriteStdin")
	if err != nil {
		t.Fatal(err)
	}
	_ = st.SendMsg(&sandboxv1.WriteStdinRequest{JobId: "job_1", Data: []byte("x")})
	_ = st.CloseSend()
	var wr sandboxv1.WriteStdinResponse
	if err := st.RecvMsg(&wr); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("WriteStdin without a key: %v", err)
	}

	// No such service or method.
	for _, m := range []string{"/genesis.sandbox.v1.Nope/Nope", "/genesis.sandbox.v1.ExecService/Nope", "/v1/sandboxes"} {
		err := cc.Invoke(ctx, m, &sandboxv1.GetJobRequest{}, &sandboxv1.Job{})
		if status.Code(err) != codes.Unimplemented {
			t.Fatalf("%s: %v", m, err)
		}
	}
}

// TestNativeServerBridgesFrames: the bridge's writer sends each whole
// frame however the handler splits or joins its writes, and its body
// yields the messages as frames.
func TestNativeServerBridgesFrames(t *testing.T) {
	t.Parallel()
	s := &fakeStream{}
	w := &bridgeWriter{stream: s, header: make(http.Header)}
	frames := []byte{0, 0, 0, 0, 3, 'a', 'b', 'c', 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 'd', 'e'}
	for _, cut := range [][]int{{1, 4, 6, 9, 13, 15, 19}, {20}} {
		s.sent = nil
		rest := frames
		prev := 0
		for _, c := range cut {
			if _, err := w.Write(rest[:c-prev]); err != nil {
				t.Fatal(err)
			}
			rest, prev = rest[c-prev:], c
		}
		if _, err := w.Write(rest); err != nil {
			t.Fatal(err)
		}
		if len(s.sent) != 3 || string(s.sent[0]) != "abc" || len(s.sent[1]) != 0 || string(s.sent[2]) != "de" {
			t.Fatalf("cuts %v: sent %q", cut, s.sent)
		}
	}
	s.recv = []rawFrame{rawFrame("xyz"), rawFrame{}}
	b, err := io.ReadAll(&bridgeBody{stream: s})
	if err != nil || string(b) != "\x00\x00\x00\x00\x03xyz\x00\x00\x00\x00\x00" {
		t.Fatalf("body %q %v", b, err)
	}
}

type fakeStream struct {
	grpc.ServerStream
	sent []rawFrame
	recv []rawFrame
}

func (f *fakeStream) SendMsg(m any) error {
	f.sent = append(f.sent, slices.Clone(m.(rawFrame)))
	return nil
}

func (f *fakeStream) RecvMsg(m any) error {
	if len(f.recv) == 0 {
		return io.EOF
	}
	*m.(*rawFrame), f.recv = f.recv[0], f.recv[1:]
	return nil
}

func (f *fakeStream) SetHeader(metadata.MD) error { return nil }

// BenchmarkTransports: a grpc-go client's health check over the main
// listener's transport (connect on net/http's HTTP/2 in cleartext) and
// over the native listener's; the same handler over HTTP/1.1 keep-alive
// (Connect's unary protocol) and a GET of an empty answer for scale: what
// each transport costs a small unary call.
func BenchmarkTransports(b *testing.B) {
	e, _ := testEdge(b)
	ctx := context.Background()
	check := func(b *testing.B, cc *grpc.ClientConn) {
		hc := healthpb.NewHealthClient(cc)
		cpu0 := processCPU(b)
		for b.Loop() {
			if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				b.Fatal(err)
			}
		}
		// The CPU of client and server (one process) per call: steadier
		// than the wall time on a shared host.
		b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
	}
	b.Run("grpc-nethttp-h2c", func(b *testing.B) {
		srv := httptest.NewUnstartedServer(e.Handler())
		srv.Config.Protocols = new(http.Protocols)
		srv.Config.Protocols.SetHTTP1(true)
		srv.Config.Protocols.SetUnencryptedHTTP2(true)
		srv.Start()
		defer srv.Close()
		check(b, dial(b, strings.TrimPrefix(srv.URL, "http://")))
	})
	b.Run("grpc-native", func(b *testing.B) { check(b, nativeClient(b, e)) })
	b.Run("connect-proto-http1", func(b *testing.B) {
		// The same handler (Connect's unary protocol) over HTTP/1.1.
		srv := httptest.NewServer(e.Handler())
		defer srv.Close()
		for b.Loop() {
			resp, err := srv.Client().Post(srv.URL+"/grpc.health.v1.Health/Check", "application/proto", nil)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatal(resp.Status)
			}
		}
	})
	b.Run("http1-get", func(b *testing.B) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"status":"ok"}`)) }))
		defer srv.Close()
		for b.Loop() {
			resp, err := srv.Client().Get(srv.URL)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

// processCPU is the CPU time this process has used so far.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
