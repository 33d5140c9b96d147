package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/snapshots"
)

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.Health{Status: "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ok, checks := s.ctl.Readiness(r.Context())
	if !ok {
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, api.Health{Status: "unavailable", Checks: checks})
		return
	}
	writeJSON(w, http.StatusOK, api.Health{Status: "ok", Checks: checks})
}

func (s *Server) profileList(w http.ResponseWriter, r *http.Request) ([]api.Profile, bool) {
	views, err := s.ctl.Profiles(r.Context())
	if err != nil {
		s.writeProblem(w, r, err)
		return nil, false
	}
	out := make([]api.Profile, len(views))
	for i, v := range views {
		out[i] = apiwire.Profile(v)
	}
	return out, true
}

func (s *Server) profiles(w http.ResponseWriter, r *http.Request) {
	items, ok := s.profileList(w, r)
	if ok {
		writeJSON(w, http.StatusOK, api.ProfileList{Items: items})
	}
}

func (s *Server) capabilities(w http.ResponseWriter, r *http.Request) {
	p := s.ctl.Probe(r.Context())
	dq := s.ctl.DiskQuota(r.Context())
	items, ok := s.profileList(w, r)
	if !ok {
		return
	}
	c := api.Capabilities{
		Driver: p.Driver, Healthy: p.Healthy, Error: p.Error, DaemonVersion: p.DaemonVersion,
		APIVersion: p.APIVersion, KernelVersion: p.KernelVersion, CgroupVersion: p.CgroupVersion,
		Checkpoint: api.Feature{Supported: p.Checkpoint.Supported, Method: p.Checkpoint.Method, Reason: p.Checkpoint.Reason},
		DiskQuota:  apiwire.DiskQuota(dq),
		RiskPolicy: control.RiskPolicy(p),
		Profiles:   items,
		CheckedAt:  p.CheckedAt,
		Runtimes:   []api.RuntimeInfo{},
		Network:    apiwire.NetworkCapabilities(s.ctl.NetworkCapabilities()),
	}
	// The probe's types are the driver's, which the API may not import, so
	// they cannot be named in a conversion of wire.go: read here.
	for _, rt := range p.Runtimes {
		c.Runtimes = append(c.Runtimes, api.RuntimeInfo{Name: rt.Name, Path: rt.Path, Version: rt.Version,
			Healthy: rt.Healthy, Error: rt.Error, SmokeMS: rt.SmokeMS, CheckedAt: rt.CheckedAt})
	}
	writeJSON(w, http.StatusOK, c)
}

func etag(sb *sandbox.Sandbox) string { return `"` + strconv.FormatInt(sb.ResourceVersion, 10) + `"` }

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var req api.CreateSandboxRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	in := apiwire.CreateSandboxInput(tenantOf(r), r.Header.Get(api.HeaderIdempotencyKey), req)
	start := time.Now()
	var sb *sandbox.Sandbox
	var made *snapshots.Made
	var err error
	if req.SnapshotID != "" {
		if s.snaps == nil {
			s.writeProblem(w, r, errdefs.WithCode("not_supported", fmt.Errorf("this service keeps no snapshots: %w", errdefs.ErrNotImplemented)))
			return
		}
		if made, err = s.snaps.CreateFrom(r.Context(), req.SnapshotID, in); err == nil {
			sb = made.Sandbox
		}
	} else {
		sb, err = s.ctl.CreateSandbox(r.Context(), in)
	}
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	s.metrics.observeCreate(sb.Runtime, start)
	w.Header().Set("ETag", etag(sb))
	w.Header().Set("Location", "/v1/sandboxes/"+sb.ID)
	out := apiwire.Sandbox(sb)
	if made != nil {
		out = apiwire.Made(made)
	}
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	// An admin key lists any tenant's sandboxes (?tenant=NAME, or * for
	// every tenant's); a tenant's key only its own.
	scope, err := control.ListScope(tenantOf(r), principalOf(r).Admin, q.Get("tenant"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	f := control.SandboxFilter{Tenant: scope, Profile: q.Get("profile")}
	for _, st := range q["state"] {
		for _, one := range strings.Split(st, ",") {
			f.States = append(f.States, sandbox.State(one))
		}
	}
	for _, kv := range q["metadata"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			s.writeProblem(w, r, fmt.Errorf("metadata filter %q must be key=value: %w", kv, errdefs.ErrInvalidArgument))
			return
		}
		if f.Metadata == nil {
			f.Metadata = map[string]string{}
		}
		f.Metadata[k] = v
	}
	list, err := s.ctl.ListSandboxes(r.Context(), f)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := api.SandboxList{Items: make([]api.Sandbox, len(list))}
	for i, sb := range list {
		out.Items[i] = apiwire.Sandbox(sb)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	sb, err := s.ctl.GetSandbox(r.Context(), tenantOf(r), r.PathValue("id"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("ETag", etag(sb))
	out := apiwire.Sandbox(sb)
	out.Endpoints = s.endpoints(sb.ID, sb.Profile)
	if s.services != nil {
		for _, st := range s.services.Of(sb.ID) {
			out.Services = append(out.Services, apiwire.ServiceStatus(st))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) patchSandbox(w http.ResponseWriter, r *http.Request) {
	ifv, err := parseIfMatch(r.Header.Get("If-Match"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	var req api.PatchSandboxRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	sb, err := s.ctl.PatchSandbox(r.Context(), tenantOf(r), r.PathValue("id"), ifv, req.Metadata)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("ETag", etag(sb))
	writeJSON(w, http.StatusOK, apiwire.Sandbox(sb))
}

// renewSandbox serves POST /v1/sandboxes/{id}/renew {ttl_seconds}.
func (s *Server) renewSandbox(w http.ResponseWriter, r *http.Request) {
	var req api.RenewSandboxRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	sb, err := s.ctl.RenewSandbox(r.Context(), tenantOf(r), r.PathValue("id"), req.TTLSeconds)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("ETag", etag(sb))
	writeJSON(w, http.StatusOK, apiwire.Sandbox(sb))
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) {
	if err := s.ctl.DeleteSandbox(r.Context(), tenantOf(r), r.PathValue("id")); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// execInput translates an exec request body.
func execInput(r *http.Request, req api.ExecRequest) (jobs.ExecInput, error) {
	return apiwire.ExecIn(tenantOf(r), r.PathValue("id"), req)
}

func invalidArg(msg string) error { return fmt.Errorf("%s: %w", msg, errdefs.ErrInvalidArgument) }

func notFound(what, id string) error { return fmt.Errorf("%s %q: %w", what, id, errdefs.ErrNotFound) }

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	var req api.ExecRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	in, err := execInput(r, req)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if wantsEventStream(r) {
		s.execStream(w, r, in)
		return
	}
	if req.Background {
		job, err := s.jobs.StartJob(r.Context(), in)
		if err != nil {
			s.writeProblem(w, r, err)
			return
		}
		w.Header().Set("Location", "/v1/jobs/"+job.ID)
		writeJSON(w, http.StatusAccepted, s.jobWithArtifacts(r, job))
		return
	}
	out, err := s.jobs.Exec(r.Context(), in)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.execResult(r, req, out))
}

// listSandboxJobs serves GET /v1/sandboxes/{id}/jobs?state=&limit=: the
// sandbox's jobs, newest first.
func (s *Server) listSandboxJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var states []sandbox.JobState
	for _, st := range q["state"] {
		for _, one := range strings.Split(st, ",") {
			states = append(states, sandbox.JobState(one))
		}
	}
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			s.writeProblem(w, r, fmt.Errorf("limit %q is not a number: %w", v, errdefs.ErrInvalidArgument))
			return
		}
		limit = n
	}
	list, err := s.jobs.ListSandboxJobs(r.Context(), tenantOf(r), r.PathValue("id"), states, limit)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := api.JobList{Items: make([]api.Job, 0, len(list))}
	for _, j := range list {
		out.Items = append(out.Items, apiwire.Job(j))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	j, err := s.jobs.GetJob(r.Context(), tenantOf(r), r.PathValue("id"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.jobWithArtifacts(r, j))
}
