package httpapi

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/snapshots"
)

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, client.Health{Status: "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ok, checks := s.ctl.Readiness(r.Context())
	if !ok {
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, client.Health{Status: "unavailable", Checks: checks})
		return
	}
	writeJSON(w, http.StatusOK, client.Health{Status: "ok", Checks: checks})
}

func profileWire(v control.ProfileView) client.Profile {
	status := imageStatus(v.ImagePresent, v.ImageBuild)
	p := client.Profile{
		Name: v.Name, Description: v.Description, Image: v.ImageRef, ImageStatus: status,
		AllowedRuntimes:  runtimes(v.AllowedRuntimes),
		UsableRuntimes:   runtimes(v.UsableRuntimes),
		DefaultResources: client.Resources{CPU: v.Resources.CPU, MemoryMB: v.Resources.MemoryMB, Pids: v.Resources.Pids, DiskMB: v.Resources.DiskMB},
		Network:          string(v.Network.Mode), User: v.User, ReadOnlyRoot: v.ReadOnlyRoot,
		FileRoots: v.Roots(),
	}
	if !v.ImagePresent {
		p.BuildCommand = v.BuildCommand
		p.ImageBuild = imageBuildWire(v.ImageBuild)
	}
	p.Pools = []client.ProfilePool{}
	if v.WarmPools {
		for _, ps := range v.Pools {
			p.Pools = append(p.Pools, client.ProfilePool{Runtime: string(ps.Runtime), MinIdle: ps.MinIdle, MaxTotal: ps.MaxTotal})
		}
	}
	p.Lease = client.ProfileLease{DefaultTTLSeconds: v.LeaseDefaultTTL, MaxTTLSeconds: v.LeaseMaxTTL}
	p.Versions = v.Versions
	if b := v.Browser; b != nil {
		p.Browser = &client.ProfileBrowser{CDPPort: b.CDPPort, PlaywrightPort: b.PlaywrightPort, DownloadsDir: b.DownloadsDir, MaxActions: b.MaxActions}
	}
	if d := v.Desktop; d != nil {
		p.Desktop = &client.ProfileDesktop{Width: d.Width, Height: d.Height, MaxActions: d.MaxActions}
	}
	return p
}

func runtimes(rs []sandbox.Runtime) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

func (s *Server) profileList(w http.ResponseWriter, r *http.Request) ([]client.Profile, bool) {
	views, err := s.ctl.Profiles(r.Context())
	if err != nil {
		s.writeProblem(w, r, err)
		return nil, false
	}
	out := make([]client.Profile, len(views))
	for i, v := range views {
		out[i] = profileWire(v)
	}
	return out, true
}

func (s *Server) profiles(w http.ResponseWriter, r *http.Request) {
	items, ok := s.profileList(w, r)
	if ok {
		writeJSON(w, http.StatusOK, client.ProfileList{Items: items})
	}
}

func (s *Server) capabilities(w http.ResponseWriter, r *http.Request) {
	p := s.ctl.Probe(r.Context())
	dq := s.ctl.DiskQuota(r.Context())
	items, ok := s.profileList(w, r)
	if !ok {
		return
	}
	c := client.Capabilities{
		Driver: p.Driver, Healthy: p.Healthy, Error: p.Error, DaemonVersion: p.DaemonVersion,
		APIVersion: p.APIVersion, KernelVersion: p.KernelVersion, CgroupVersion: p.CgroupVersion,
		Checkpoint: client.Feature{Supported: p.Checkpoint.Supported, Method: p.Checkpoint.Method, Reason: p.Checkpoint.Reason},
		DiskQuota:  client.Feature{Supported: dq.Enforced, Enforced: dq.Enforced, Method: dq.Method, Reason: dq.Reason},
		RiskPolicy: control.RiskPolicy(p),
		Profiles:   items,
		CheckedAt:  p.CheckedAt,
		Runtimes:   []client.RuntimeInfo{},
		Network:    networkCapabilitiesWire(s.ctl.NetworkCapabilities()),
	}
	for _, rt := range p.Runtimes {
		c.Runtimes = append(c.Runtimes, client.RuntimeInfo{Name: rt.Name, Path: rt.Path, Version: rt.Version,
			Healthy: rt.Healthy, Error: rt.Error, SmokeMS: rt.SmokeMS, CheckedAt: rt.CheckedAt})
	}
	writeJSON(w, http.StatusOK, c)
}

func sandboxWire(sb *sandbox.Sandbox) client.Sandbox {
	out := client.Sandbox{
		ID: sb.ID, Tenant: sb.Tenant, State: string(sb.State), Profile: sb.Profile, Runtime: string(sb.Runtime),
		RiskLevel: string(sb.RiskLevel), Image: sb.Image,
		Resources:     client.Resources{CPU: sb.Resources.CPU, MemoryMB: sb.Resources.MemoryMB, Pids: sb.Resources.Pids, DiskMB: sb.Resources.DiskMB},
		Metadata:      sb.Metadata,
		FailureReason: sb.FailureReason, ResourceVersion: strconv.FormatInt(sb.ResourceVersion, 10),
		CreatedAt: sb.CreatedAt, UpdatedAt: sb.UpdatedAt, ExpiresAt: sb.ExpiresAt,
		Network: networkSummaryWire(sb.Network), Reserved: sb.Reserved,
	}
	if su := sb.Suspension; su != nil {
		out.Suspension = &client.Suspension{ResumeState: string(su.ResumeState), Operation: su.Operation, Memory: su.Memory, Since: su.Since}
	}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	for k := range sb.Env {
		out.EnvKeys = append(out.EnvKeys, k)
	}
	slices.Sort(out.EnvKeys)
	return out
}

func etag(sb *sandbox.Sandbox) string { return `"` + strconv.FormatInt(sb.ResourceVersion, 10) + `"` }

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	var req client.CreateSandboxRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	in := control.CreateSandboxInput{
		Tenant: tenantOf(r), Profile: req.Profile, Runtime: req.Runtime, RiskLevel: req.RiskLevel,
		Env: req.Env, Metadata: req.Metadata, TTLSeconds: req.TTLSeconds, ReadOnlyRoot: req.ReadOnlyRoot,
		IdempotencyKey: r.Header.Get("Idempotency-Key"), WaitSeconds: req.WaitSeconds, Network: policyIn(req.Network),
	}
	if req.Resources != nil {
		in.Resources = sandbox.Resources{CPU: req.Resources.CPU, MemoryMB: req.Resources.MemoryMB, Pids: req.Resources.Pids, DiskMB: req.Resources.DiskMB}
	}
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
	out := sandboxWire(sb)
	if made != nil {
		out = madeWire(made)
	}
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := control.SandboxFilter{Tenant: tenantOf(r), Profile: q.Get("profile")}
	// An admin key lists any tenant's sandboxes (?tenant=NAME, or * for
	// every tenant's); a tenant's key only its own.
	if t := q.Get("tenant"); t != "" && t != f.Tenant {
		if !principalOf(r).Admin {
			s.writeProblem(w, r, errdefs.WithCode("admin_required", fmt.Errorf("only an admin key may list another tenant's sandboxes: %w", errdefs.ErrPermissionDenied)))
			return
		}
		f.Tenant = t
		if t == "*" {
			f.Tenant = ""
		}
	}
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
	out := client.SandboxList{Items: make([]client.Sandbox, len(list))}
	for i, sb := range list {
		out.Items[i] = sandboxWire(sb)
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
	out := sandboxWire(sb)
	out.Endpoints = s.endpoints(sb.ID, sb.Profile)
	if s.services != nil {
		for _, st := range s.services.Of(sb.ID) {
			out.Services = append(out.Services, client.ServiceStatus{Name: st.Name, State: st.State, JobID: st.JobID,
				Restarts: st.Restarts, LastExitCode: st.LastExit, Error: st.Error, Since: st.Since, ReadyAt: st.Ready})
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
	var req client.PatchSandboxRequest
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
	writeJSON(w, http.StatusOK, sandboxWire(sb))
}

// renewSandbox serves POST /v1/sandboxes/{id}/renew {ttl_seconds}.
func (s *Server) renewSandbox(w http.ResponseWriter, r *http.Request) {
	var req client.RenewSandboxRequest
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
	writeJSON(w, http.StatusOK, sandboxWire(sb))
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) {
	if err := s.ctl.DeleteSandbox(r.Context(), tenantOf(r), r.PathValue("id")); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// execInput translates an exec request body.
func execInput(r *http.Request, req client.ExecRequest) (jobs.ExecInput, error) {
	in := jobs.ExecInput{
		Tenant: tenantOf(r), SandboxID: r.PathValue("id"), Command: req.Command, Script: req.Script,
		Cwd: req.Cwd, Env: req.Env, Stdin: []byte(req.Stdin), TimeoutMS: req.TimeoutMS, MaxOutputBytes: req.MaxOutputBytes,
		Artifacts: artifactSpec(req.Artifacts), StdinStream: req.StdinStream,
	}
	if req.StdinBase64 != "" {
		if req.Stdin != "" {
			return in, invalidArg("stdin and stdin_base64 are mutually exclusive")
		}
		b, err := base64.StdEncoding.DecodeString(req.StdinBase64)
		if err != nil {
			return in, invalidArg("stdin_base64 is not valid base64")
		}
		in.Stdin = b
	}
	return in, nil
}

func invalidArg(msg string) error { return fmt.Errorf("%s: %w", msg, errdefs.ErrInvalidArgument) }

func notFound(what, id string) error { return fmt.Errorf("%s %q: %w", what, id, errdefs.ErrNotFound) }

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	var req client.ExecRequest
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

func execResultWire(out *jobs.ExecOutput) client.ExecResult {
	j := out.Job
	res := client.ExecResult{
		JobID: j.ID, ExitReason: string(j.ExitReason), Signal: j.Signal,
		Stdout: string(out.Stdout), Stderr: string(out.Stderr),
		StdoutTruncated: j.StdoutTruncated, StderrTruncated: j.StderrTruncated,
		StdoutBytes: j.StdoutBytes, StderrBytes: j.StderrBytes, DurationMS: out.DurationMS,
	}
	if j.ExitCode != nil {
		res.ExitCode = *j.ExitCode
	}
	if !utf8.Valid(out.Stdout) {
		res.StdoutBase64 = base64.StdEncoding.EncodeToString(out.Stdout)
	}
	if !utf8.Valid(out.Stderr) {
		res.StderrBase64 = base64.StdEncoding.EncodeToString(out.Stderr)
	}
	return res
}

func jobWire(j *sandbox.Job) client.Job {
	return client.Job{
		ID: j.ID, SandboxID: j.SandboxID, State: string(j.State), Command: j.Command, Script: j.Script, Cwd: j.Cwd,
		ExitCode: j.ExitCode, ExitReason: string(j.ExitReason), Signal: j.Signal, Error: j.Error,
		StdoutBytes: j.StdoutBytes, StderrBytes: j.StderrBytes, StdoutTruncated: j.StdoutTruncated,
		StderrTruncated: j.StderrTruncated, TimeoutMS: j.TimeoutMS, Mode: string(j.Mode), CreatedAt: j.CreatedAt,
		StartedAt: j.StartedAt, FinishedAt: j.FinishedAt,
	}
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
	out := client.JobList{Items: make([]client.Job, 0, len(list))}
	for _, j := range list {
		out.Items = append(out.Items, jobWire(j))
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
