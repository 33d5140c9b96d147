// Package grpcedge serves the public API over gRPC, gRPC-Web and Connect
// from one set of connect-go handlers (the services of proto/genesis/
// sandbox/v1, generated into gen/genesis/sandbox/v1), on the same listener
// as the HTTP API: Edge.Route sends a request whose path is one of its
// services' to the edge and anything else to the HTTP API. Edge.NativeServer
// serves gRPC alone on a listener of its own, on grpc-go's transport: a
// unary call goes straight to the same handler method inside the same
// wrapping (nativeunary.go), a streaming one is bridged as raw frames into
// the same connect handler (native.go).
//
// It is an edge beside internal/httpapi, never on top of it: each RPC calls
// the same application layer (control, jobs, tenancy) that the matching
// HTTP route calls. API keys are resolved by internal/auth, the key check
// of every edge (Config.Auth), and errors are translated once, from
// errdefs' class table (GRPCCode, Code), with the stable code and the
// request id in a google.rpc.ErrorInfo detail and Retry-After in a
// google.rpc.RetryInfo detail.
//
// It must not import internal/httpapi, client, assemble or a command, nor
// reach the store, a driver, admission, the job log or the agent protocol
// but through control and the workload packages.
package grpcedge
