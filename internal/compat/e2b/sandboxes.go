package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/compat/shared"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/snapshots"
)

// templateKey is the metadata key that remembers a sandbox's E2B template;
// it is not shown in the SDK's metadata.
const templateKey = "e2b.template"

// createBody is what the SDKs send to create a sandbox (fields not read
// here, such as network or mcp, are ignored).
type createBody struct {
	TemplateID string            `json:"templateID"`
	Timeout    *int64            `json:"timeout"`
	Metadata   map[string]string `json:"metadata"`
	EnvVars    map[string]string `json:"envVars"`
	// AutoPause (lifecycle onTimeout "pause") pauses the sandbox when its
	// timeout runs out instead of ending it; AutoPauseMemory false keeps
	// its files only; AutoResume wakes it paused at the next traffic.
	AutoPause       bool  `json:"autoPause"`
	AutoPauseMemory *bool `json:"autoPauseMemory"`
	AutoResume      *struct {
		Enabled bool `json:"enabled"`
	} `json:"autoResume"`
	// VolumeMounts (E2B volumes) are not mapped: a create asking for any
	// is refused rather than served without them (docs/volumes.md).
	VolumeMounts []json.RawMessage `json:"volumeMounts"`
}

// created is the answer to create and connect.
type created struct {
	SandboxID          string  `json:"sandboxID"`
	TemplateID         string  `json:"templateID"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken"`
	TrafficAccessToken string  `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// detail is a sandbox as get and list show it.
type detail struct {
	SandboxID       string            `json:"sandboxID"`
	TemplateID      string            `json:"templateID"`
	ClientID        string            `json:"clientID"`
	StartedAt       time.Time         `json:"startedAt"`
	EndAt           time.Time         `json:"endAt"`
	CPUCount        int               `json:"cpuCount"`
	MemoryMB        int64             `json:"memoryMB"`
	DiskSizeMB      int64             `json:"diskSizeMB"`
	Metadata        map[string]string `json:"metadata"`
	State           string            `json:"state"`
	EnvdVersion     string            `json:"envdVersion"`
	EnvdAccessToken string            `json:"envdAccessToken,omitempty"`
	Domain          *string           `json:"domain"`
	Lifecycle       *lifecycle        `json:"lifecycle,omitempty"`
}

// profileOf maps a template to a profile by the configured table.
func (a *Adapter) profileOf(template string) (string, error) {
	if template == "" {
		template = "base"
	}
	p, ok := a.set.Templates[template]
	if !ok {
		names := make([]string, 0, len(a.set.Templates))
		for k := range a.set.Templates {
			names = append(names, k)
		}
		slices.Sort(names)
		return "", errdefs.WithCode("template_not_found", fmt.Errorf(
			"template %q is not known here (known: %s; e2b.templates in the config maps templates to profiles): %w",
			template, strings.Join(names, ", "), errdefs.ErrInvalidArgument))
	}
	return p, nil
}

// createSandbox serves POST /sandboxes and /v2/sandboxes: a lease of the
// template's profile, risk and runtime from the tenant's policy.
func (a *Adapter) createSandbox(w http.ResponseWriter, r *http.Request) {
	var body createBody
	if err := shared.DecodeBody(r, &body); err != nil {
		a.writeError(w, r, err)
		return
	}
	if body.TemplateID == "" {
		body.TemplateID = "base"
	}
	tenant := tenantOf(r.Context())
	profile, err := a.profileOf(body.TemplateID)
	var from *sandbox.Snapshot
	if err != nil {
		// A snapshot of the caller's names a template too
		// (Sandbox.create(snapshotId)).
		if sn, ok := a.findSnapshot(r.Context(), tenant, body.TemplateID); ok {
			from, err = sn, nil
		}
	}
	if err == nil && len(body.VolumeMounts) > 0 {
		err = errdefs.WithCode("not_supported", errdefs.Mark(fmt.Errorf(
			"volumeMounts (E2B volumes) are not available through this adapter; this service's named volumes are under /v1/volumes"), errdefs.ErrNotImplemented))
	}
	if err == nil && (body.AutoPause || body.AutoResume != nil && body.AutoResume.Enabled) && a.snaps == nil {
		err = notSupported("lifecycle onTimeout 'pause'")
	}
	if err == nil && body.AutoResume != nil && body.AutoResume.Enabled && (!body.AutoPause || body.AutoPauseMemory != nil && !*body.AutoPauseMemory) {
		err = errdefs.WithCode("invalid_lifecycle", errdefs.Mark(fmt.Errorf("autoResume needs onTimeout 'pause' keeping the memory"), errdefs.ErrInvalidArgument))
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	ttl := a.set.DefaultTimeoutSeconds
	if ttl <= 0 {
		ttl = 300
	}
	if body.Timeout != nil {
		ttl = *body.Timeout
	}
	md := map[string]string{}
	for k, v := range body.Metadata {
		if !hiddenKeys[k] {
			md[k] = v
		}
	}
	md[templateKey] = body.TemplateID
	if body.AutoPause {
		md[onTimeoutKey] = "pause"
		if body.AutoPauseMemory != nil {
			md[pauseMemoryKey] = strconv.FormatBool(*body.AutoPauseMemory)
		}
	}
	if body.AutoResume != nil && body.AutoResume.Enabled {
		md[autoResumeKey] = "true"
	}
	if from != nil {
		// A sandbox of the snapshot's profile and runtime with its state;
		// it has no lease: its timeout is its own TTL.
		made, err := a.snaps.CreateFrom(r.Context(), from.ID, snapshots.CreateOptions{Tenant: tenant, TTLSeconds: ttl, Env: body.EnvVars, Metadata: md})
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusCreated, a.created(r.Context(), made.Sandbox))
		return
	}
	out, err := a.ctl.AcquireLease(r.Context(), control.AcquireLeaseInput{
		Tenant: tenant, Profile: profile, TTLSeconds: &ttl, Holder: "e2b", Env: body.EnvVars, Metadata: md,
	})
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, a.created(r.Context(), out.Sandbox))
}

func (a *Adapter) created(ctx context.Context, sb *sandbox.Sandbox) created {
	tok := a.accessToken(ctx, sb.ID)
	return created{SandboxID: sb.ID, TemplateID: templateOf(sb), ClientID: "genesis", EnvdVersion: envdVersion,
		EnvdAccessToken: tok, TrafficAccessToken: tok, Domain: a.domain()}
}

func templateOf(sb *sandbox.Sandbox) string {
	if t := sb.Metadata[templateKey]; t != "" {
		return t
	}
	return sb.Profile
}

// detail is sb as get and list show it; started is when the caller's
// create or lease of it happened (shared.StartedAt).
func (a *Adapter) detail(sb *sandbox.Sandbox, started time.Time) detail {
	md := map[string]string{}
	for k, v := range sb.Metadata {
		if !hiddenKeys[k] {
			md[k] = v
		}
	}
	d := detail{SandboxID: sb.ID, TemplateID: templateOf(sb), ClientID: "genesis", StartedAt: started.UTC(),
		CPUCount: max(1, int(sb.Resources.CPU+0.999)), MemoryMB: sb.Resources.MemoryMB, DiskSizeMB: sb.Resources.DiskMB,
		Metadata: md, State: stateOf(sb), EnvdVersion: envdVersion, Domain: a.domain()}
	if sb.ExpiresAt != nil {
		d.EndAt = *sb.ExpiresAt
	}
	return d
}

// getSandbox serves GET /sandboxes/{id}: a running or paused sandbox.
func (a *Adapter) getSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := a.visibleSandbox(r, r.PathValue("id"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	started, err := shared.StartedAt(r.Context(), a.ctl, tenantOf(r.Context()), sb)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	d := a.detail(sb, started)
	d.EnvdAccessToken = a.accessToken(r.Context(), sb.ID)
	d.Lifecycle = lifecycleOf(sb)
	writeJSON(w, http.StatusOK, d)
}

// runningSandbox answers a running sandbox of the caller, or E2B's 404.
func (a *Adapter) runningSandbox(r *http.Request, id string) (*sandbox.Sandbox, error) {
	sb, err := a.ctl.GetSandbox(r.Context(), tenantOf(r.Context()), id)
	if err != nil {
		if errdefs.Is(err, errdefs.ErrNotFound) {
			return nil, notFound(id)
		}
		return nil, err
	}
	if !shared.Running(sb.State) {
		return nil, notFound(id)
	}
	return sb, nil
}

// visibleSandbox answers a running or paused sandbox of the caller, or
// E2B's 404.
func (a *Adapter) visibleSandbox(r *http.Request, id string) (*sandbox.Sandbox, error) {
	sb, err := a.ctl.GetSandbox(r.Context(), tenantOf(r.Context()), id)
	if err != nil {
		if errdefs.Is(err, errdefs.ErrNotFound) {
			return nil, notFound(id)
		}
		return nil, err
	}
	if !shared.Running(sb.State) && !sb.State.Suspended() {
		return nil, notFound(id)
	}
	return sb, nil
}

// listSandboxes serves GET /sandboxes and /v2/sandboxes: the caller's
// running and paused sandboxes, filtered by metadata (an encoded query
// string) and state (running, paused, comma-separated; both by default).
func (a *Adapter) listSandboxes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := control.SandboxFilter{Tenant: tenantOf(r.Context())}
	if m := q.Get("metadata"); m != "" {
		vals, err := url.ParseQuery(m)
		if err != nil {
			a.writeError(w, r, fmt.Errorf("metadata filter %q: %v: %w", m, err, errdefs.ErrInvalidArgument))
			return
		}
		f.Metadata = map[string]string{}
		for k, v := range vals {
			f.Metadata[k] = v[0]
		}
	}
	states := map[string]bool{"running": true, "paused": true}
	if st := q.Get("state"); st != "" {
		states = map[string]bool{}
		for _, one := range strings.Split(st, ",") {
			states[strings.TrimSpace(one)] = true
		}
	}
	list, err := a.ctl.ListSandboxes(r.Context(), f)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	starts, err := shared.Starts(r.Context(), a.ctl, f.Tenant)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out := []detail{}
	for _, sb := range list {
		if (shared.Running(sb.State) || sb.State.Suspended()) && states[stateOf(sb)] {
			out = append(out, a.detail(sb, shared.StartOf(sb, starts)))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// renewTo reads {timeout} and makes a running sandbox of the caller end
// timeout seconds from now: its lease renewed, or, for a sandbox made
// through /v1 without one, the sandbox itself. A timeout of 0 renews
// nothing when optional (connect).
func (a *Adapter) renewTo(r *http.Request, optional bool) (*sandbox.Sandbox, error) {
	var body struct {
		Timeout int64 `json:"timeout"`
	}
	if err := shared.DecodeBody(r, &body); err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	sb, err := a.runningSandbox(r, id)
	if err != nil || optional && body.Timeout <= 0 {
		return sb, err
	}
	return a.renew(r.Context(), tenantOf(r.Context()), sb, body.Timeout)
}

// renew makes a sandbox of tenant end timeout seconds from now: its lease
// renewed, or, for a sandbox without one, the sandbox itself.
func (a *Adapter) renew(ctx context.Context, tenant string, sb *sandbox.Sandbox, timeout int64) (*sandbox.Sandbox, error) {
	l, err := shared.ActiveLease(ctx, a.ctl, tenant, sb.ID)
	if err != nil {
		return a.ctl.RenewSandbox(ctx, tenant, sb.ID, timeout)
	}
	if _, err := a.ctl.RenewLease(ctx, tenant, l.ID, &timeout); err != nil {
		return nil, err
	}
	return sb, nil
}

// setTimeout serves POST /sandboxes/{id}/timeout {timeout}: the
// lease is renewed to end timeout seconds from now.
func (a *Adapter) setTimeout(w http.ResponseWriter, r *http.Request) {
	if _, err := a.renewTo(r, false); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// connectSandbox serves POST /v2/sandboxes/{id}/connect {timeout,
// memory}: a running sandbox's access details, its timeout extended when
// given (200); a paused one is resumed first and ends timeout seconds
// (default e2b.default_timeout_seconds) from now (201).
func (a *Adapter) connectSandbox(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Timeout *int64 `json:"timeout"`
		Memory  *bool  `json:"memory"`
	}
	if err := shared.DecodeBody(r, &body); err != nil {
		a.writeError(w, r, err)
		return
	}
	sb, err := a.visibleSandbox(r, r.PathValue("id"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	switch {
	case sb.State.Suspended():
		if sb, err = a.resumeOnConnect(r.Context(), tenantOf(r.Context()), sb, body.Memory); err == nil {
			_, err = a.renew(r.Context(), tenantOf(r.Context()), sb, a.timeoutOr(body.Timeout))
		}
		status = http.StatusCreated
	case body.Timeout != nil && *body.Timeout > 0:
		_, err = a.renew(r.Context(), tenantOf(r.Context()), sb, *body.Timeout)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, status, a.created(r.Context(), sb))
}

// killSandbox serves DELETE /sandboxes/{id}: its lease is released
// (or, for a sandbox made without one, the sandbox deleted); 204, or 404
// when there is no such running or paused sandbox. The access token dies
// with it.
func (a *Adapter) killSandbox(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	tenant := tenantOf(r.Context())
	if _, err := a.visibleSandbox(r, id); err != nil {
		a.writeError(w, r, err)
		return
	}
	var err error
	if l, lerr := shared.ActiveLease(r.Context(), a.ctl, tenantOf(r.Context()), id); lerr == nil {
		err = a.ctl.ReleaseLease(r.Context(), tenant, l.ID)
	} else {
		err = a.ctl.DeleteSandbox(r.Context(), tenant, id)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	a.forget(id)
	w.WriteHeader(http.StatusNoContent)
}
