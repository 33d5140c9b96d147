package grpcedge

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	sandboxv1 "genesis.dev/sandbox/gen/genesis/sandbox/v1"
	"genesis.dev/sandbox/gen/genesis/sandbox/v1/sandboxv1connect"
	"genesis.dev/sandbox/internal/errdefs"
)

// TestNativeUnaryCoversEveryRPC: on the native listener every unary RPC
// of every service of the edge has its own handler (nativeUnary), every
// streaming one the bridge, so none is left to the unknown-service path.
func TestNativeUnaryCoversEveryRPC(t *testing.T) {
	t.Parallel()
	e, _ := testEdge(t)
	descs, err := e.nativeServices()
	if err != nil {
		t.Fatal(err)
	}
	if len(descs) != len(e.served) {
		t.Fatalf("%d service descriptions for %d services", len(descs), len(e.served))
	}
	unary := 0
	for _, d := range descs {
		sd := descriptorOf(t, d.ServiceName)
		if got, want := len(d.Methods)+len(d.Streams), sd.Methods().Len(); got != want {
			t.Errorf("%s: %d methods described, the proto has %d", d.ServiceName, got, want)
		}
		for _, m := range d.Methods {
			md := sd.Methods().ByName(protoreflect.Name(m.MethodName))
			if md == nil || md.IsStreamingClient() || md.IsStreamingServer() {
				t.Errorf("%s/%s is no unary RPC", d.ServiceName, m.MethodName)
			}
			unary++
		}
	}
	if unary == 0 {
		t.Fatal("no unary RPC")
	}
}

func descriptorOf(t *testing.T, name string) protoreflect.ServiceDescriptor {
	t.Helper()
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
	if err != nil {
		t.Fatal(err)
	}
	return d.(protoreflect.ServiceDescriptor)
}

// parityExec is an ExecService whose Exec answers as its request's
// command says: a result with a header and a trailer, a class error with
// a Retry-After, a connect error of its own, or a panic.
type parityExec struct {
	sandboxv1connect.UnimplementedExecServiceHandler
}

func (parityExec) Exec(ctx context.Context, req *connect.Request[sandboxv1.ExecRequest]) (*connect.Response[sandboxv1.ExecResult], error) {
	switch strings.Join(req.Msg.Command, " ") {
	case "ok":
		resp := connect.NewResponse(&sandboxv1.ExecResult{ExitCode: 3, Stdout: []byte("out:" + tenantOf(ctx) + ":" + req.Header().Get("X-Extra"))})
		resp.Header().Set("X-Answer", "yes")
		resp.Trailer().Set("X-Done", "1")
		return resp, nil
	case "busy":
		return nil, errdefs.WithRetryAfter(7*time.Second, errdefs.WithCode("busy_now", errdefs.Mark(errors.New("too busy"), errdefs.ErrResourceExhausted)))
	case "connect":
		ce := connect.NewError(connect.CodeAborted, errors.New("aborted here"))
		ce.Meta().Set("X-Why", "because")
		return nil, ce
	case "panic":
		panic("boom")
	}
	return nil, errors.New("an unexpected failure")
}

// TestNativeUnaryAnswersAsConnect: the native listener's unary path and
// connect's gRPC protocol (the main listener) answer the same calls of
// the same handler alike: message, header and trailer metadata (the
// request id among them), code, message and details of every error,
// a panic answered INTERNAL.
func TestNativeUnaryAnswersAsConnect(t *testing.T) {
	t.Parallel()
	e, _ := testEdge(t)
	useParityExec(e)
	srv := httptest.NewUnstartedServer(e.Handler())
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	main := dial(t, strings.TrimPrefix(srv.URL, "http://"))
	native := nativeClient(t, e)

	type answer struct {
		res             *sandboxv1.ExecResult
		header, trailer metadata.MD
		status          *status.Status
	}
	ask := func(cc *grpc.ClientConn, command, key string) answer {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+key, "x-request-id", "req-parity", "x-extra", "extra")
		var a answer
		res := &sandboxv1.ExecResult{}
		err := cc.Invoke(ctx, "/genesis.sandbox.v1.ExecService/Exec", &sandboxv1.ExecRequest{SandboxId: "sbx_1", Command: []string{command}}, res, grpc.Header(&a.header), grpc.Trailer(&a.trailer))
		if err == nil {
			a.res = res
		}
		a.status = status.Convert(err)
		// The transport's own metadata differs by server, not by path.
		for _, md := range []metadata.MD{a.header, a.trailer} {
			for k := range md {
				if strings.HasPrefix(k, "grpc-") || k == "content-type" || k == "date" {
					delete(md, k)
				}
			}
		}
		return a
	}
	for _, tc := range []struct{ command, key string }{
		{"ok", "good"}, {"busy", "good"}, {"connect", "good"}, {"panic", "good"}, {"other", "good"}, {"ok", "wrong"}, {"ok", ""},
	} {
		want, got := ask(main, tc.command, tc.key), ask(native, tc.command, tc.key)
		if !proto.Equal(want.res, got.res) || !proto.Equal(want.status.Proto(), got.status.Proto()) {
			t.Errorf("%s with key %q: native answers %v %v, connect %v %v", tc.command, tc.key, got.res, got.status.Proto(), want.res, want.status.Proto())
		}
		if !mdEqual(want.header, got.header) || !mdEqual(want.trailer, got.trailer) {
			t.Errorf("%s with key %q: native's metadata %q / %q, connect's %q / %q", tc.command, tc.key, map[string][]string(got.header), map[string][]string(got.trailer), map[string][]string(want.header), map[string][]string(want.trailer))
		}
		if tc.command == "ok" && tc.key == "good" && (got.res == nil || string(got.res.Stdout) != "out:t1:extra" || got.header.Get("x-request-id")[0] != "req-parity") {
			t.Errorf("the answer %v, header %v", got.res, got.header)
		}
	}
}

// useParityExec makes parityExec the Exec service of e, on both
// listeners.
func useParityExec(e *Edge) {
	for i, s := range e.served {
		if s.name == sandboxv1connect.ExecServiceName {
			e.served[i] = serve[sandboxv1connect.ExecServiceHandler](s.name, parityExec{}, sandboxv1connect.NewExecServiceHandler, e.handlerOptions())
			e.mux = http.NewServeMux()
			e.mux.Handle(e.served[i].path, e.served[i].handler)
		}
	}
}

func mdEqual(a, b metadata.MD) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		if strings.Join(va, "\x00") != strings.Join(b[k], "\x00") {
			return false
		}
	}
	return true
}

// BenchmarkNativeUnary: a unary call through the edge's wrapping (key,
// request id, audit) to a handler that answers at once, on the native
// listener bridged (the connect handler) and direct (nativeUnary), and on
// the main listener (connect on net/http's HTTP/2): what each path costs
// beside the RPC's own work, in wall and process CPU time and allocations.
func BenchmarkNativeUnary(b *testing.B) {
	e, _ := testEdge(b)
	useParityExec(e)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer good")
	run := func(b *testing.B, cc *grpc.ClientConn) {
		b.ReportAllocs()
		req := &sandboxv1.ExecRequest{SandboxId: "sbx_1", Command: []string{"ok"}}
		cpu0 := processCPU(b)
		for b.Loop() {
			if err := cc.Invoke(ctx, "/genesis.sandbox.v1.ExecService/Exec", req, &sandboxv1.ExecResult{}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
	}
	serveNative := func(b *testing.B, direct bool) *grpc.ClientConn {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := e.nativeServer(direct)
		go func() { _ = srv.Serve(ln) }()
		b.Cleanup(srv.Stop)
		return dial(b, ln.Addr().String())
	}
	b.Run("native-bridged", func(b *testing.B) { run(b, serveNative(b, false)) })
	b.Run("native-direct", func(b *testing.B) { run(b, serveNative(b, true)) })
	b.Run("main-h2c", func(b *testing.B) {
		srv := httptest.NewUnstartedServer(e.Handler())
		srv.Config.Protocols = new(http.Protocols)
		srv.Config.Protocols.SetUnencryptedHTTP2(true)
		srv.Start()
		defer srv.Close()
		run(b, dial(b, strings.TrimPrefix(srv.URL, "http://")))
	})
}
