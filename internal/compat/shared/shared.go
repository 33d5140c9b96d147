// Package shared holds what the compatibility adapters (E2B, OpenSandbox)
// do alike over the application services: reading a JSON body, telling a
// running sandbox, finding the active lease that holds a sandbox, telling
// when a sandbox began for its caller, and serving a file of a sandbox
// through the file gateway.
//
// Import rule (internal/layering): control, files, sandbox and errdefs
// only, like the adapters themselves.
package shared

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/files"
	"genesis.dev/sandbox/internal/sandbox"
)

// DecodeBody reads a JSON body of at most 1 MiB into v; an empty body
// leaves v as it is.
func DecodeBody(r *http.Request, v any) error {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("reading the body: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errdefs.Invalid("body is not the expected JSON: %v", err)
	}
	return nil
}

// Running reports whether a sandbox is one the SDKs see as running.
func Running(st sandbox.State) bool {
	switch st {
	case sandbox.StateReady, sandbox.StateLeased, sandbox.StateBusy, sandbox.StateIdle:
		return true
	}
	return false
}

// ErrNoLease is ActiveLease's answer for a sandbox no active lease holds
// (one made through /v1 without a lease).
var ErrNoLease = errors.New("no active lease")

// ActiveLease finds the active lease of tenant that holds a sandbox.
func ActiveLease(ctx context.Context, ctl *control.Service, tenant, sandboxID string) (*sandbox.Lease, error) {
	ls, err := ctl.ListLeases(ctx, control.LeaseFilter{Tenant: tenant, SandboxID: sandboxID, States: []sandbox.LeaseState{sandbox.LeaseActive}})
	if err != nil {
		return nil, err
	}
	for _, l := range ls {
		if l.State == sandbox.LeaseActive {
			return l, nil
		}
	}
	return nil, ErrNoLease
}

// Starts maps each sandbox of tenant that a lease of tenant holds, or
// held, to the time its newest such lease began: the caller's create or
// lease, which for a warm-pool member is its claim, not its birth.
func Starts(ctx context.Context, ctl *control.Service, tenant string) (map[string]time.Time, error) {
	return starts(ctx, ctl, control.LeaseFilter{Tenant: tenant})
}

func starts(ctx context.Context, ctl *control.Service, f control.LeaseFilter) (map[string]time.Time, error) {
	ls, err := ctl.ListLeases(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make(map[string]time.Time, len(ls))
	for _, l := range ls {
		if t, ok := out[l.SandboxID]; !ok || l.CreatedAt.After(t) {
			out[l.SandboxID] = l.CreatedAt
		}
	}
	return out, nil
}

// StartOf is when sb began for its caller, the SDKs' startedAt or
// createdAt, read from starts (a Starts answer): the start of its newest
// lease, or, for a sandbox made through /v1 without a lease, its own
// creation.
func StartOf(sb *sandbox.Sandbox, starts map[string]time.Time) time.Time {
	if t, ok := starts[sb.ID]; ok {
		return t
	}
	return sb.CreatedAt
}

// StartedAt is StartOf with the leases of tenant that held sb read from
// the store.
func StartedAt(ctx context.Context, ctl *control.Service, tenant string, sb *sandbox.Sandbox) (time.Time, error) {
	known, err := starts(ctx, ctl, control.LeaseFilter{Tenant: tenant, SandboxID: sb.ID})
	if err != nil {
		return time.Time{}, err
	}
	return StartOf(sb, known), nil
}

// ServeFile answers a file of tenant's sandbox through the gateway, as
// application/octet-stream (Range and conditional headers pass through);
// a failure goes to fail.
func ServeFile(w http.ResponseWriter, r *http.Request, g *files.Gateway, tenant, sandboxID, path string, fail func(http.ResponseWriter, *http.Request, error)) {
	fr, cancel, err := g.ReadFile(r.Context(), tenant, sandboxID, http.MethodGet, path, r.Header)
	if err != nil {
		fail(w, r, err)
		return
	}
	defer cancel()
	defer fr.Body.Close()
	for _, k := range []string{"Content-Length", "Content-Range", "Accept-Ranges", "ETag", "Last-Modified"} {
		if v := fr.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(fr.Status)
	_, _ = io.Copy(w, fr.Body)
}
