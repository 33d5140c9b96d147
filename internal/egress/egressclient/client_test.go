package egressclient

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/errdefs"
)

// serve runs h on a Unix socket in a temp dir and returns its path.
func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "egress.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return sock
}

func TestClientRoundTripsAndMapsErrors(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	var got egress.SandboxConfig
	mux.HandleFunc("PUT /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			t.Error(err)
		}
		if r.PathValue("id") == "bad" {
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(egress.Error{Code: egress.CodeInvalidPolicy, Message: "nope"})
			return
		}
		json.NewEncoder(w).Encode(egress.SandboxStatus{ID: r.PathValue("id"), LocalIP: got.LocalIP, Mode: got.Policy.Mode, Listening: true})
	})
	mux.HandleFunc("DELETE /v1/sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("GET /v1/events", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("after") != "7" || r.URL.Query().Get("limit") != "2" {
			t.Errorf("query %q", r.URL.RawQuery)
		}
		json.NewEncoder(w).Encode(egress.EventsPage{Events: []egress.Event{{Seq: 8, Proto: egress.ProtoDNS}}, Next: 8})
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(egress.Health{Status: "ok"})
	})
	c := Dial(serve(t, mux))
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if h, err := c.WaitReady(ctx, 0); err != nil || h.Status != "ok" {
		t.Fatalf("WaitReady = %+v, %v", h, err)
	}
	cfg := egress.SandboxConfig{LocalIP: "10.9.0.2", Policy: egress.Policy{Mode: egress.ModeAllowlist}}
	st, err := c.PutSandbox(ctx, "sb-1", cfg)
	if err != nil || st.ID != "sb-1" || st.LocalIP != "10.9.0.2" || !st.Listening {
		t.Fatalf("PutSandbox = %+v, %v", st, err)
	}
	_, err = c.PutSandbox(ctx, "bad", cfg)
	if !errors.Is(err, errdefs.ErrInvalidArgument) || errdefs.Code(err) != egress.CodeInvalidPolicy {
		t.Fatalf("bad put: %v (code %q)", err, errdefs.Code(err))
	}
	if err := c.DeleteSandbox(ctx, "sb-1"); err != nil {
		t.Fatal(err)
	}
	p, err := c.Events(ctx, 7, 2)
	if err != nil || len(p.Events) != 1 || p.Next != 8 {
		t.Fatalf("Events = %+v, %v", p, err)
	}
	if _, err := c.Counters(ctx); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("unserved route: %v", err)
	}
}

func TestClientGatewayDown(t *testing.T) {
	t.Parallel()
	c := Dial(filepath.Join(t.TempDir(), "missing.sock"))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := c.Health(ctx); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("Health on missing socket: %v", err)
	}
	if _, err := c.WaitReady(ctx, 20*time.Millisecond); !errors.Is(err, errdefs.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitReady on missing socket: %v", err)
	}
}
