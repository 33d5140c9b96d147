package opensandbox

import (
	"fmt"
	"io"
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
)

// Metadata keys the adapter keeps on a sandbox: the image the SDK asked
// for and the entrypoint it sent (shown back; this service's agent is the
// sandbox's first process whatever it says).
const (
	imageKey      = "opensandbox.image"
	entrypointKey = "opensandbox.entrypoint"
)

// status is a sandbox's state as the SDK knows it.
type status struct {
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

type imageSpec struct {
	URI string `json:"uri"`
}

// info is a sandbox as get and list show it; optional fields are
// omitted, never null.
type info struct {
	ID         string            `json:"id"`
	Image      *imageSpec        `json:"image,omitempty"`
	Status     status            `json:"status"`
	Metadata   map[string]string `json:"metadata,omitempty"`
	Entrypoint []string          `json:"entrypoint"`
	ExpiresAt  string            `json:"expiresAt,omitempty"`
	CreatedAt  string            `json:"createdAt"`
}

// createBody is what the SDK sends to create (the fields this adapter
// reads; the rest — resources, network policy, extensions — is the
// profile's and the tenant's to decide; volumes map onto named volumes,
// volumes.go).
type createBody struct {
	Image *struct {
		URI string `json:"uri"`
	} `json:"image"`
	SnapshotID string            `json:"snapshotId"`
	Entrypoint []string          `json:"entrypoint"`
	Timeout    *int64            `json:"timeout"`
	Env        map[string]string `json:"env"`
	Metadata   map[string]string `json:"metadata"`
	Volumes    []osVolume        `json:"volumes"`
}

// profileOf maps an image to a profile: by the configured table, else an
// image that names a profile of this service (tool-basic) selects it.
func (a *Adapter) profileOf(image string) (string, error) {
	if p, ok := a.set.Images[image]; ok {
		return p, nil
	}
	if _, ok := a.ctl.ProfileConfig(image); ok {
		return image, nil
	}
	names := make([]string, 0, len(a.set.Images))
	for k := range a.set.Images {
		names = append(names, k)
	}
	slices.Sort(names)
	return "", errdefs.WithCode("invalid_image", fmt.Errorf(
		"image %q is neither a known image (%s; opensandbox.images in the config maps images to profiles) nor a profile of this service (genesis profiles lists them): %w",
		image, strings.Join(names, ", "), errdefs.ErrInvalidArgument))
}

// stateOf is a sandbox's state in the SDK's words.
func stateOf(sb *sandbox.Sandbox) string {
	st := sb.State
	switch {
	case shared.Running(st):
		return "Running"
	case st.Suspended():
		return suspendedState(sb)
	case st == sandbox.StateDestroyed:
		return "Terminated"
	case st == sandbox.StateFailed:
		return "Failed"
	case st == sandbox.StateDraining:
		return "Stopping"
	}
	return "Pending"
}

// info is sb as get and list show it; created is when the caller's create
// of it happened (shared.StartedAt), not a warm-pool member's birth.
func (a *Adapter) info(sb *sandbox.Sandbox, created time.Time) info {
	md := map[string]string{}
	for k, v := range sb.Metadata {
		if k != imageKey && k != entrypointKey {
			md[k] = v
		}
	}
	out := info{ID: sb.ID, Status: status{State: stateOf(sb)}, CreatedAt: created.UTC().Format(time.RFC3339Nano),
		Entrypoint: strings.Fields(sb.Metadata[entrypointKey])}
	if len(md) > 0 {
		out.Metadata = md
	}
	if out.Entrypoint == nil {
		out.Entrypoint = []string{}
	}
	if img := sb.Metadata[imageKey]; img != "" {
		out.Image = &imageSpec{URI: img}
	}
	if sb.ExpiresAt != nil {
		out.ExpiresAt = sb.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	switch {
	case sb.State == sandbox.StateDestroyed:
		out.Status.Reason, out.Status.Message = terminatedReason(sb.FailureReason), sb.FailureReason
	case sb.FailureReason != "":
		out.Status.Reason, out.Status.Message = "Failed", sb.FailureReason
	}
	return out
}

// terminatedReason is the reason code, in OpenSandbox's words, of a
// sandbox destroyed for why (its record's FailureReason): a kill (the
// lease released, or a plain delete) is user_delete, an expiry ttl_expiry.
func terminatedReason(why string) string {
	switch why {
	case "", control.EndLeaseReleased:
		return "user_delete"
	case control.EndLeaseExpired, control.EndTTLExpired:
		return "ttl_expiry"
	case control.EndDrained:
		return "service_shutdown"
	}
	return "terminated"
}

// createSandbox serves POST /v1/sandboxes: a lease of the image's profile,
// risk and runtime from the tenant's policy; 202 with the sandbox, which
// is already running.
func (a *Adapter) createSandbox(w http.ResponseWriter, r *http.Request) {
	var body createBody
	if err := shared.DecodeBody(r, &body); err != nil {
		a.writeError(w, r, err)
		return
	}
	if body.SnapshotID != "" || body.Image == nil || body.Image.URI == "" {
		a.writeError(w, r, errdefs.WithCode("invalid_image", errdefs.Invalid("create needs image.uri (snapshots are not supported here)")))
		return
	}
	profile, err := a.profileOf(body.Image.URI)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	ttl := a.set.DefaultTimeoutSeconds
	if ttl <= 0 {
		ttl = 600
	}
	if body.Timeout != nil {
		ttl = *body.Timeout
	}
	md := map[string]string{}
	for k, v := range body.Metadata {
		md[k] = v
	}
	md[imageKey] = body.Image.URI
	md[entrypointKey] = strings.Join(body.Entrypoint, " ")
	vols, err := a.volumeRequests(r.Context(), tenantOf(r.Context()), body.Volumes)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out, err := a.ctl.AcquireLease(r.Context(), control.AcquireLeaseInput{
		Tenant: tenantOf(r.Context()), Profile: profile, TTLSeconds: &ttl, Holder: "opensandbox", Env: body.Env, Metadata: md,
		Volumes: vols,
	})
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, a.info(out.Sandbox, out.Lease.CreatedAt))
}

// sandboxOfCaller finds the caller's sandbox (404 SANDBOX_NOT_FOUND
// otherwise; a destroyed one is still shown, Terminated).
func (a *Adapter) sandboxOfCaller(r *http.Request) (*sandbox.Sandbox, error) {
	id := r.PathValue("id")
	sb, err := a.ctl.GetSandbox(r.Context(), tenantOf(r.Context()), id)
	if err != nil && errdefs.Is(err, errdefs.ErrNotFound) {
		return nil, errdefs.WithCode("sandbox_not_found", fmt.Errorf("sandbox %s not found: %w", id, errdefs.ErrNotFound))
	}
	return sb, err
}

// getSandbox serves GET /v1/sandboxes/{id}.
func (a *Adapter) getSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := a.sandboxOfCaller(r)
	var created time.Time
	if err == nil {
		created, err = shared.StartedAt(r.Context(), a.ctl, tenantOf(r.Context()), sb)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, a.info(sb, created))
}

// pagination is the SDK's page of a list.
type pagination struct {
	Page        int  `json:"page"`
	PageSize    int  `json:"pageSize"`
	TotalItems  int  `json:"totalItems"`
	TotalPages  int  `json:"totalPages"`
	HasNextPage bool `json:"hasNextPage"`
}

// listSandboxes serves GET /v1/sandboxes?state=&metadata=k=v&k2=v2&page=&pageSize=:
// the caller's sandboxes, newest first, one page.
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
	page, size := 1, 20
	for name, p := range map[string]*int{"page": &page, "pageSize": &size} {
		if v := q.Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || (name == "pageSize" && n > 200) {
				a.writeError(w, r, errdefs.Invalid("%s %q must be a number from 1 (pageSize at most 200)", name, v))
				return
			}
			*p = n
		}
	}
	states := map[string]bool{}
	for _, st := range q["state"] {
		for _, one := range strings.Split(st, ",") {
			states[strings.ToLower(strings.TrimSpace(one))] = true
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
	items := []info{}
	for _, sb := range list {
		st := stateOf(sb)
		if len(states) > 0 && !states[strings.ToLower(st)] || len(states) == 0 && st == "Terminated" {
			continue
		}
		items = append(items, a.info(sb, shared.StartOf(sb, starts)))
	}
	slices.SortFunc(items, func(x, y info) int { return strings.Compare(y.CreatedAt, x.CreatedAt) })
	total := len(items)
	from := min((page-1)*size, total)
	to := min(from+size, total)
	writeJSON(w, http.StatusOK, map[string]any{"items": items[from:to], "pagination": pagination{
		Page: page, PageSize: size, TotalItems: total, TotalPages: (total + size - 1) / size, HasNextPage: to < total}})
}

// deleteSandbox serves DELETE /v1/sandboxes/{id}: its lease released (or,
// for a sandbox made through /v1 without one, the sandbox deleted); 204.
// The execd token dies with it.
func (a *Adapter) deleteSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := a.sandboxOfCaller(r)
	if err == nil && !shared.Running(sb.State) && !sb.State.Suspended() {
		err = errdefs.WithCode("sandbox_not_found", fmt.Errorf("sandbox %s is %s: %w", sb.ID, sb.State, errdefs.ErrNotFound))
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	tenant := tenantOf(r.Context())
	if l, lerr := shared.ActiveLease(r.Context(), a.ctl, tenantOf(r.Context()), sb.ID); lerr == nil {
		err = a.ctl.ReleaseLease(r.Context(), tenant, l.ID)
	} else {
		err = a.ctl.DeleteSandbox(r.Context(), tenant, sb.ID)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// renewExpiration serves POST /v1/sandboxes/{id}/renew-expiration
// {expiresAt}: the lease (or the sandbox) renewed to end then.
func (a *Adapter) renewExpiration(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ExpiresAt string `json:"expiresAt"`
	}
	if err := shared.DecodeBody(r, &body); err != nil {
		a.writeError(w, r, err)
		return
	}
	at, err := time.Parse(time.RFC3339Nano, body.ExpiresAt)
	if err != nil {
		a.writeError(w, r, errdefs.Invalid("expiresAt %q is not an RFC 3339 time", body.ExpiresAt))
		return
	}
	ttl := int64(time.Until(at).Round(time.Second) / time.Second)
	if ttl < 1 {
		a.writeError(w, r, errdefs.Invalid("expiresAt %s is not in the future", body.ExpiresAt))
		return
	}
	sb, err := a.sandboxOfCaller(r)
	if err == nil && !shared.Running(sb.State) && !sb.State.Suspended() {
		err = errdefs.WithCode("sandbox_not_found", fmt.Errorf("sandbox %s is %s: %w", sb.ID, sb.State, errdefs.ErrNotFound))
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	tenant := tenantOf(r.Context())
	if l, lerr := shared.ActiveLease(r.Context(), a.ctl, tenantOf(r.Context()), sb.ID); lerr == nil {
		_, err = a.ctl.RenewLease(r.Context(), tenant, l.ID, &ttl)
	} else {
		_, err = a.ctl.RenewSandbox(r.Context(), tenant, sb.ID, ttl)
	}
	if err == nil {
		sb, err = a.sandboxOfCaller(r)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out := map[string]string{"expiresAt": body.ExpiresAt}
	if sb.ExpiresAt != nil {
		out["expiresAt"] = sb.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	writeJSON(w, http.StatusOK, out)
}

// endpoint serves GET /v1/sandboxes/{id}/endpoints/{port}: where the SDK
// reaches the sandbox's execd (and, asked at every create, its egress
// sidecar): this service, at the host the caller used, with the sandbox's
// token in the headers the SDK sends along. Other ports are refused: the
// service's own port routes reach them (docs/ports.md).
func (a *Adapter) endpoint(w http.ResponseWriter, r *http.Request) {
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || port < 1 || port > 65535 {
		a.writeError(w, r, errdefs.Invalid("port %q is not 1..65535", r.PathValue("port")))
		return
	}
	sb, err := a.sandboxOfCaller(r)
	if err == nil && !shared.Running(sb.State) && !a.wakes(sb) { // a hibernated one wakes at its first execd call
		err = errdefs.WithCode("sandbox_not_running", fmt.Errorf("sandbox %s is %s: %w", sb.ID, sb.State, errdefs.ErrFailedPrecondition))
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	var where string
	switch port {
	case ExecdPort:
		where = "/execd"
	case EgressPort:
		where = "/egress"
	default:
		// Any other port: its own preview origin, with a link token.
		if a.preview == nil {
			a.writeError(w, r, errdefs.WithCode("port_not_served", fmt.Errorf(
				"port %d has no OpenSandbox endpoint here; reach it through /v1/sandboxes/%s/ports/%d (docs/ports.md): %w", port, sb.ID, port, errdefs.ErrNotFound)))
			return
		}
		host, token, err := a.preview(r.Context(), principalOf(r.Context()), sb.ID, port)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"endpoint": host, "headers": map[string]string{PreviewHeader: token}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"endpoint": a.publicHost + Prefix + "/sandboxes/" + sb.ID + where,
		"headers":  map[string]string{TokenHeader: a.execdToken(r.Context(), sb.ID)},
	})
}

// metricsEvent serves POST /v1/metrics/events: the SDK's telemetry, taken
// and dropped.
func (a *Adapter) metricsEvent(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, 64<<10))
	w.WriteHeader(http.StatusNoContent)
}
