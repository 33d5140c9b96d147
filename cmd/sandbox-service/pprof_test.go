package main

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// TestPprofLoopbackOnly checks that the profiling endpoints refuse an
// address that is not a loopback IP, and serve on one that is.
func TestPprofLoopbackOnly(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	for _, addr := range []string{"0.0.0.0:0", ":0", "localhost:0", "192.0.2.1:0", "nonsense"} {
		if _, stop, err := startPprof(addr, log); err == nil {
			stop()
			t.Errorf("startPprof(%q) served; want a refusal", addr)
		}
	}
	addr, stop, err := startPprof("127.0.0.1:0", log)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get("http://" + addr + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("/debug/pprof/cmdline: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}
