package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// pprofEnv names the environment variable that, when set to a loopback
// address (e.g. 127.0.0.1:6060), serves Go's profiling endpoints
// (/debug/pprof/) there, on a listener of their own, never on the API's.
// Unset (the default) serves nothing.
const pprofEnv = "GENESIS_PPROF_ADDR"

// serverTimingEnv names the environment variable that, set to 1, adds a
// Server-Timing header to the answer of a synchronous exec: where its time
// went inside the service (httpapi.Config.ServerTiming), for benchmarks.
const serverTimingEnv = "GENESIS_SERVER_TIMING"

// startPprof serves the profiling endpoints on addr, which must be a
// loopback address, and returns the address it listens on and the
// function that stops them.
func startPprof(addr string, log *slog.Logger) (bound string, stop func(), err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", pprofEnv, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return "", nil, fmt.Errorf("%s=%s: the profiling endpoints listen on a loopback IP address only", pprofEnv, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", pprofEnv, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Warn("profiling endpoints served", "addr", ln.Addr().String(), "env", pprofEnv)
	return ln.Addr().String(), func() { srv.Close() }, nil
}
