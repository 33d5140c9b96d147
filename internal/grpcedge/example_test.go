package grpcedge_test

import (
	"context"
	"fmt"
	"net/http"

	"connectrpc.com/connect"

	sandboxv1 "genesis.dev/sandbox/gen/genesis/sandbox/v1"
	"genesis.dev/sandbox/gen/genesis/sandbox/v1/sandboxv1connect"
)

// The Go example of docs/grpc.md: the generated connect-go clients over
// gRPC in cleartext HTTP/2, with the API key on every call. (Compiled, not
// run: it needs a service; test/e2e/grpc_test.go runs the same calls.)
func Example() {
	ctx, key, base := context.Background(), "<api key>", "http://127.0.0.1:8080"
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true) // gRPC over cleartext HTTP/2 (h2c)
	h2c := &http.Client{Transport: &http.Transport{Protocols: protocols}}
	auth := connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+key)
			return next(ctx, req)
		}
	}))
	sandboxes := sandboxv1connect.NewSandboxServiceClient(h2c, base, connect.WithGRPC(), auth)
	execs := sandboxv1connect.NewExecServiceClient(h2c, base, connect.WithGRPC(), auth)
	sb, err := sandboxes.CreateSandbox(ctx, connect.NewRequest(&sandboxv1.CreateSandboxRequest{Profile: "code-python-basic", RiskLevel: "low"}))
	if err != nil {
		fmt.Println(connect.CodeOf(err), err)
		return
	}
	defer sandboxes.DeleteSandbox(context.WithoutCancel(ctx), connect.NewRequest(&sandboxv1.DeleteSandboxRequest{Id: sb.Msg.Id}))
	res, err := execs.Exec(ctx, connect.NewRequest(&sandboxv1.ExecRequest{SandboxId: sb.Msg.Id, Command: []string{"echo", "hi"}}))
	if err != nil {
		fmt.Println(connect.CodeOf(err), err)
		return
	}
	fmt.Printf("%s", res.Msg.Stdout)
}
