// Package slowlogtest reads the slow request log's lines in tests: the
// HTTP API's (internal/httpapi) and the RPC edge's (internal/grpcedge).
//
// It imports the standard library only, and only _test.go files import
// it; no binary links it.
package slowlogtest
