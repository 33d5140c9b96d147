package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/policy"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/slowlog"
	"genesis.dev/sandbox/internal/snapshots"
	"genesis.dev/sandbox/internal/tenancy"
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

func (s *Server) profiles(r *http.Request) (api.ProfileList, error) {
	return wired(apiwire.ProfileList)(s.ctl.Profiles(r.Context()))
}

func (s *Server) capabilities(w http.ResponseWriter, r *http.Request) {
	p := s.ctl.Probe(r.Context())
	dq := s.ctl.DiskQuota(r.Context())
	profiles, err := s.profiles(r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	c := api.Capabilities{
		Driver: p.Driver, Healthy: p.Healthy, Error: p.Error, DaemonVersion: p.DaemonVersion,
		APIVersion: p.APIVersion, KernelVersion: p.KernelVersion, CgroupVersion: p.CgroupVersion,
		Checkpoint: api.Feature{Supported: p.Checkpoint.Supported, Method: p.Checkpoint.Method, Reason: p.Checkpoint.Reason},
		DiskQuota:  apiwire.DiskQuota(dq),
		RiskPolicy: policy.RiskPolicy(p.RuntimeNames()),
		Profiles:   profiles.Items,
		CheckedAt:  p.CheckedAt,
		Runtimes:   []api.RuntimeInfo{},
		Network:    apiwire.NetworkCapabilities(s.ctl.NetworkCapabilities()),
		Volumes:    apiwire.VolumesCapability(s.vols),
	}
	// The probe's types are the driver's, which the API may not import, so
	// they cannot be named in a conversion of wire.go: read here.
	for _, rt := range p.Runtimes {
		f := rt.Features
		c.Runtimes = append(c.Runtimes, api.RuntimeInfo{Name: rt.Name, Path: rt.Path, Version: rt.Version,
			Healthy: rt.Healthy, Error: rt.Error, SmokeMS: rt.SmokeMS, CheckedAt: rt.CheckedAt,
			Features: api.RuntimeFeatures{
				Pause:            api.Feature{Supported: f.Pause.Supported, Method: f.Pause.Method, Reason: f.Pause.Reason},
				FSSnapshot:       api.Feature{Supported: f.FSSnapshot.Supported, Method: f.FSSnapshot.Method, Reason: f.FSSnapshot.Reason},
				MemoryCheckpoint: api.Feature{Supported: f.MemoryCheckpoint.Supported, Method: f.MemoryCheckpoint.Method, Reason: f.MemoryCheckpoint.Reason},
			}})
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
	slowlog.AllowMS(r.Context(), req.WaitSeconds*1000, 0)
	sb, made, err := snapshots.Create(r.Context(), s.ctl, s.snaps, req.SnapshotID, in)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	slowlog.Of(r.Context()).SetSandbox(sb.ID)
	s.metrics.observeCreate(sb.Runtime, start)
	w.Header().Set("ETag", etag(sb))
	w.Header().Set("Location", "/v1/sandboxes/"+sb.ID)
	out := apiwire.Sandbox(sb)
	if made != nil {
		out = apiwire.Made(made)
	}
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) listSandboxes(r *http.Request) (api.SandboxList, error) {
	q := r.URL.Query()
	// An admin key lists any tenant's sandboxes (?tenant=NAME, or * for
	// every tenant's); a tenant's key only its own.
	scope, err := tenancy.ListScope(tenantOf(r), principalOf(r).Admin, q.Get("tenant"))
	if err != nil {
		return api.SandboxList{}, err
	}
	f, err := apiwire.SandboxFilter(scope, q)
	if err != nil {
		return api.SandboxList{}, err
	}
	return wired(apiwire.SandboxList)(s.ctl.ListSandboxes(r.Context(), f))
}

func (s *Server) getSandbox(h http.Header, r *http.Request) (api.Sandbox, error) {
	sb, err := s.ctl.GetSandbox(r.Context(), tenantOf(r), r.PathValue("id"))
	out, err := restored(h, sb, nil, err)
	if err != nil {
		return out, err
	}
	out.Endpoints = s.endpoints(sb.ID, sb.Profile)
	if s.services != nil {
		for _, st := range s.services.Of(sb.ID) {
			out.Services = append(out.Services, apiwire.ServiceStatus(st))
		}
	}
	return out, nil
}

// patchSandbox serves PATCH /v1/sandboxes/{id} {metadata}; If-Match is
// checked before the body is read.
func (s *Server) patchSandbox(w http.ResponseWriter, r *http.Request) {
	ifv, err := apiwire.ParseIfMatch(r.Header.Get("If-Match"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	serveBodyHeaded(s, http.StatusOK, func(h http.Header, r *http.Request, req *api.PatchSandboxRequest) (api.Sandbox, error) {
		sb, err := s.ctl.PatchSandbox(r.Context(), tenantOf(r), r.PathValue("id"), ifv, req.Metadata)
		return restored(h, sb, nil, err)
	})(w, r)
}

// renewSandbox serves POST /v1/sandboxes/{id}/renew {ttl_seconds}.
func (s *Server) renewSandbox(h http.Header, r *http.Request, req *api.RenewSandboxRequest) (api.Sandbox, error) {
	sb, err := s.ctl.RenewSandbox(r.Context(), tenantOf(r), r.PathValue("id"), req.TTLSeconds)
	return restored(h, sb, nil, err)
}

func (s *Server) deleteSandbox(r *http.Request) error {
	return s.ctl.DeleteSandbox(r.Context(), tenantOf(r), r.PathValue("id"))
}

func invalidArg(msg string) error { return errdefs.Invalid("%s", msg) }

// execIn decodes an exec request of the sandbox in r's path; its time
// limit is a wait its caller asked for (slowlog.Allow).
func (s *Server) execIn(w http.ResponseWriter, r *http.Request) (req api.ExecRequest, in jobs.ExecInput, err error) {
	if err = s.decode(w, r, &req); err == nil {
		slowlog.AllowMS(r.Context(), req.TimeoutMS, s.execTimeout)
		in, err = apiwire.ExecIn(tenantOf(r), r.PathValue("id"), req)
	}
	return req, in, err
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	req, in, err := s.execIn(w, r)
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
	ctx, timed := s.execTimings(r)
	out, err := s.jobs.Exec(ctx, in)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	timed(w.Header())
	writeJSON(w, http.StatusOK, s.execResult(r, req, out))
}

// listSandboxJobs serves GET /v1/sandboxes/{id}/jobs?state=&limit=: the
// sandbox's jobs, newest first.
func (s *Server) listSandboxJobs(r *http.Request) (api.JobList, error) {
	states, limit, err := apiwire.JobFilter(r.URL.Query())
	if err != nil {
		return api.JobList{}, err
	}
	return wired(apiwire.JobList)(s.jobs.ListSandboxJobs(r.Context(), tenantOf(r), r.PathValue("id"), states, limit))
}

func (s *Server) getJob(r *http.Request) (api.Job, error) {
	j, err := s.jobs.GetJob(r.Context(), tenantOf(r), r.PathValue("id"))
	if err != nil {
		return api.Job{}, err
	}
	return s.jobWithArtifacts(r, j), nil
}
