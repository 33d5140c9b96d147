package apiwire

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/browser"
	"genesis.dev/sandbox/internal/changes"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/files"
	"genesis.dev/sandbox/internal/imagebuild"
	"genesis.dev/sandbox/internal/imagestate"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/mcp"
	"genesis.dev/sandbox/internal/mcp/servers"
	"genesis.dev/sandbox/internal/recording"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/skills"
	"genesis.dev/sandbox/internal/snapshots"
	"genesis.dev/sandbox/internal/tenancy"
	"genesis.dev/sandbox/internal/tenant"
	"genesis.dev/sandbox/internal/trace"
)

// invalidArg is a request's error of the caller's making.
func invalidArg(msg string) error { return errdefs.Invalid("%s", msg) }

// Profile converts control.ProfileView to its wire form.
func Profile(v control.ProfileView) api.Profile {
	status := imageStatus(v.ImagePresent, v.ImageBuild)
	p := api.Profile{
		Name: v.Name, Description: v.Description, Image: v.ImageRef, ImageStatus: status,
		AllowedRuntimes:  runtimes(v.AllowedRuntimes),
		UsableRuntimes:   runtimes(v.UsableRuntimes),
		DefaultResources: Resources(v.Resources),
		Network:          string(v.Network.Mode), User: v.User, ReadOnlyRoot: v.ReadOnlyRoot,
		FileRoots: v.Roots(),
	}
	if !v.ImagePresent {
		p.BuildCommand = v.BuildCommand
		p.ImageBuild = ImageBuild(v.ImageBuild)
	}
	p.Pools = []api.ProfilePool{}
	if v.WarmPools {
		for _, ps := range v.Pools {
			p.Pools = append(p.Pools, api.ProfilePool{Runtime: string(ps.Runtime), MinIdle: ps.MinIdle, MaxTotal: ps.MaxTotal})
		}
	}
	p.Lease = api.ProfileLease{DefaultTTLSeconds: v.LeaseDefaultTTL, MaxTTLSeconds: v.LeaseMaxTTL}
	p.Versions = v.Versions
	if b := v.Browser; b != nil {
		p.Browser = &api.ProfileBrowser{CDPPort: b.CDPPort, PlaywrightPort: b.PlaywrightPort, DownloadsDir: b.DownloadsDir, MaxActions: b.MaxActions}
	}
	if d := v.Desktop; d != nil {
		p.Desktop = &api.ProfileDesktop{Width: d.Width, Height: d.Height, MaxActions: d.MaxActions}
	}
	return p
}

// imageStatus is the wire status of an image (control.ImageStatus, which
// the gRPC edge shares).
func imageStatus(present bool, b *imagebuild.Progress) string { return imagestate.Status(present, b) }

// ImageBuild converts *imagebuild.Progress to its wire form.
func ImageBuild(b *imagebuild.Progress) *api.ImageBuild {
	if b == nil {
		return nil
	}
	timeOrNil := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		t = t.UTC()
		return &t
	}
	return &api.ImageBuild{
		State: string(b.State), Step: b.Step, StepNumber: b.StepNumber, Steps: b.Steps,
		Done: b.Done, Total: b.Total, Unit: b.Unit, Percent: b.Percent, Summary: b.Summary(), Detail: b.Detail,
		StartedAt: timeOrNil(b.StartedAt), UpdatedAt: timeOrNil(b.UpdatedAt), FinishedAt: timeOrNil(b.FinishedAt),
		Error: b.Error,
	}
}

// Images converts the profiles' images to their wire form.
func Images(views []control.ImageView) api.ImageList {
	out := api.ImageList{Items: make([]api.Image, len(views))}
	for i, v := range views {
		out.Items[i] = Image(v)
	}
	return out
}

// Image converts control.ImageView to its wire form.
func Image(v control.ImageView) api.Image {
	im := api.Image{Name: v.Name, Ref: v.Ref, Profiles: v.Profiles, Status: imageStatus(v.Present, v.Build), Build: ImageBuild(v.Build)}
	if im.Profiles == nil {
		im.Profiles = []string{}
	}
	if !v.Present {
		im.BuildCommand = v.BuildCommand
	}
	return im
}

func runtimes(rs []sandbox.Runtime) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

// Sandbox converts *sandbox.Sandbox to its wire form.
func Sandbox(sb *sandbox.Sandbox) api.Sandbox {
	out := api.Sandbox{
		ID: sb.ID, Tenant: sb.Tenant, State: string(sb.State), Profile: sb.Profile, Runtime: string(sb.Runtime),
		RiskLevel: string(sb.RiskLevel), Image: sb.Image,
		Resources:     Resources(sb.Resources),
		Metadata:      sb.Metadata,
		FailureReason: sb.FailureReason, ResourceVersion: strconv.FormatInt(sb.ResourceVersion, 10),
		CreatedAt: sb.CreatedAt, UpdatedAt: sb.UpdatedAt, ExpiresAt: sb.ExpiresAt,
		Network: NetworkSummary(sb.Network), Reserved: sb.Reserved,
	}
	if su := sb.Suspension; su != nil {
		out.Suspension = &api.Suspension{ResumeState: string(su.ResumeState), Operation: su.Operation, Memory: su.Memory, Since: su.Since}
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

// ExecResult converts *jobs.ExecOutput to its wire form.
func ExecResult(out *jobs.ExecOutput) api.ExecResult {
	j := out.Job
	res := api.ExecResult{
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

// Job converts *sandbox.Job to its wire form.
func Job(j *sandbox.Job) api.Job {
	return api.Job{
		ID: j.ID, SandboxID: j.SandboxID, State: string(j.State), Command: j.Command, Script: j.Script, Cwd: j.Cwd,
		ExitCode: j.ExitCode, ExitReason: string(j.ExitReason), Signal: j.Signal, Error: j.Error,
		StdoutBytes: j.StdoutBytes, StderrBytes: j.StderrBytes, StdoutTruncated: j.StdoutTruncated,
		StderrTruncated: j.StderrTruncated, TimeoutMS: j.TimeoutMS, Mode: string(j.Mode), CreatedAt: j.CreatedAt,
		StartedAt: j.StartedAt, FinishedAt: j.FinishedAt,
	}
}

// ArtifactSpec converts the request's *api.ArtifactRequest to the domain's *sandbox.ArtifactSpec.
func ArtifactSpec(req *api.ArtifactRequest) *sandbox.ArtifactSpec {
	if req == nil {
		return nil
	}
	return &sandbox.ArtifactSpec{Paths: req.Paths, MaxFileBytes: req.MaxFileBytes, MaxTotalBytes: req.MaxTotalBytes}
}

// Artifact converts *sandbox.Artifact to its wire form.
func Artifact(a *sandbox.Artifact) api.Artifact {
	return api.Artifact{ID: a.ID, JobID: a.JobID, SandboxID: a.SandboxID, Path: a.Path, Name: a.Name, Size: a.Size,
		SHA256: a.SHA256, MIME: a.MIME, CreatedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt}
}

// ArtifactSummary converts *sandbox.ArtifactCollection to its wire form.
func ArtifactSummary(c *sandbox.ArtifactCollection) *api.ArtifactSummary {
	if c == nil {
		return nil
	}
	return &api.ArtifactSummary{State: string(c.State), Collected: c.Collected, CollectedBytes: c.CollectedBytes,
		Skipped: len(c.Skipped), Error: c.Error}
}

// Recording converts *recording.Recording to its wire form.
func Recording(r *recording.Recording) api.Recording {
	return api.Recording{ID: r.ID, SandboxID: r.SandboxID, JobID: r.JobID, Source: r.Source, State: r.State, FPS: r.FPS, SegmentSeconds: r.SegmentSeconds,
		StartedAt: r.StartedAt, StoppedAt: r.StoppedAt, Segments: r.Segments, Bytes: r.Bytes, Error: r.Error}
}

// Lease converts *sandbox.Lease to its wire form.
func Lease(l *sandbox.Lease) api.Lease {
	out := api.Lease{
		LeaseID: l.ID, SandboxID: l.SandboxID, State: string(l.State), Warm: l.Warm, Profile: l.Profile,
		Runtime: string(l.Runtime), Holder: l.Holder, Metadata: l.Metadata, TTLSeconds: l.TTLSeconds,
		ResourceVersion: strconv.FormatInt(l.ResourceVersion, 10),
		CreatedAt:       l.CreatedAt, RenewedAt: l.RenewedAt, ExpiresAt: l.ExpiresAt, EndedAt: l.EndedAt, EndReason: l.EndReason,
		Reserved: l.Reserved,
	}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	return out
}

// Pools converts bool to its wire form.
func Pools(views []control.PoolView, draining bool) api.PoolList {
	out := api.PoolList{Items: make([]api.Pool, len(views)), Draining: draining}
	for i, v := range views {
		p := api.Pool{
			Name: v.Name, Profile: v.Profile, Runtime: string(v.Runtime), SnapshotID: v.SnapshotID, State: v.State, MinIdle: v.MinIdle, MaxTotal: v.MaxTotal,
			Counts: map[string]int{}, Total: v.Total, Starting: v.Starting, Hits: v.Hits, Misses: v.Misses,
			Made: v.Made, Replaced: v.Replaced, Recycled: v.Recycled, ResetFailed: v.ResetFailed, RefillRate: v.RefillRate, Draining: v.Draining, LastError: v.LastError,
		}
		for st, n := range v.Counts {
			p.Counts[string(st)] = n
		}
		out.Items[i] = p
	}
	return out
}

// PolicyIn converts a wire policy; nil stays nil.
func PolicyIn(p *api.NetworkPolicy) *egress.Policy {
	if p == nil {
		return nil
	}
	out := &egress.Policy{Mode: egress.Mode(p.Mode), Endpoints: p.Endpoints, Tools: p.Tools}
	for _, r := range p.Allow {
		out.Allow = append(out.Allow, egress.Rule{Host: r.Host, CIDR: r.CIDR, Ports: r.Ports})
	}
	return out
}

// PolicyOut converts egress.Policy to its wire form.
func PolicyOut(p egress.Policy) api.NetworkPolicy {
	out := api.NetworkPolicy{Mode: string(p.Mode), Endpoints: p.Endpoints, Tools: p.Tools}
	for _, r := range p.Allow {
		out.Allow = append(out.Allow, api.NetworkRule{Host: r.Host, CIDR: r.CIDR, Ports: r.Ports})
	}
	return out
}

// Network converts *sandbox.Network to its wire form.
func Network(n *sandbox.Network) api.SandboxNetwork {
	return api.SandboxNetwork{SandboxID: n.SandboxID, Policy: PolicyOut(n.Policy), Status: string(n.Status),
		StatusReason: n.StatusReason, GatewayIP: n.GatewayIP, ResourceVersion: strconv.FormatInt(n.ResourceVersion, 10),
		UpdatedAt: n.UpdatedAt}
}

// NetworkSummary converts *sandbox.NetworkSummary to its wire form.
func NetworkSummary(n *sandbox.NetworkSummary) *api.NetworkSummary {
	if n == nil {
		return nil
	}
	return &api.NetworkSummary{Mode: string(n.Mode), Status: string(n.Status), StatusReason: n.StatusReason}
}

// NetworkCapabilities converts control.NetworkCapability to its wire form.
func NetworkCapabilities(c control.NetworkCapability) api.NetworkCapabilities {
	out := api.NetworkCapabilities{Modes: map[string]bool{}, Gateway: c.Gateway, Reason: c.Reason,
		Tools: append([]string{}, c.Tools...), Endpoints: append([]string{}, c.Endpoints...)}
	for m, ok := range c.Modes {
		out.Modes[string(m)] = ok
	}
	return out
}

// Session converts *sandbox.Session to its wire form.
func Session(se *sandbox.Session) api.Session {
	return api.Session{ID: se.ID, SandboxID: se.SandboxID, Kind: string(se.Kind), State: string(se.State),
		LastJobID: se.LastJobID, Runs: se.Runs, CreatedAt: se.CreatedAt, UpdatedAt: se.UpdatedAt}
}

// Tenant converts *tenant.Tenant to its wire form.
func Tenant(t *tenant.Tenant) api.Tenant {
	q := t.Quotas
	return api.Tenant{
		Name: t.Name, Weight: max(t.Weight, 1), MinRiskLevel: string(t.MinRiskLevel), MaxToolRiskLevel: string(t.MaxToolRiskLevel), Admin: t.Admin,
		Quotas: api.Quotas{MaxSandboxes: q.MaxSandboxes, MaxCPU: q.MaxCPU, MaxMemoryMB: q.MaxMemoryMB, MaxLeases: q.MaxLeases,
			MaxVolumes: q.MaxVolumes, MaxVolumeMB: q.MaxVolumeMB},
		Source: string(t.Source), ResourceVersion: strconv.FormatInt(t.ResourceVersion, 10),
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
	}
}

// TenantView converts a tenant with its usage to its wire form.
func TenantView(v *tenancy.TenantView) api.Tenant {
	out := Tenant(v.Tenant)
	out.Usage = Usage(v.Usage)
	return out
}

// TenantList converts a list of tenants with their usage to its wire form.
func TenantList(list []*tenancy.TenantView) api.TenantList {
	out := api.TenantList{Items: make([]api.Tenant, len(list))}
	for i, v := range list {
		out.Items[i] = TenantView(v)
	}
	return out
}

// Keys converts a tenant's API keys to their wire form (never a secret).
func Keys(list []*tenant.Key) api.APIKeyList {
	out := api.APIKeyList{Items: make([]api.APIKey, len(list))}
	for i, k := range list {
		out.Items[i] = Key(k)
	}
	return out
}

// Usage converts tenant.Usage to its wire form.
func Usage(u tenant.Usage) *api.Usage {
	return &api.Usage{Sandboxes: u.Sandboxes, CPU: u.CPU, MemoryMB: u.MemoryMB, Leases: u.Leases, Volumes: u.Volumes, VolumeMB: u.VolumeMB}
}

// Key converts *tenant.Key to its wire form.
func Key(k *tenant.Key) api.APIKey {
	return api.APIKey{ID: k.ID, Tenant: k.Tenant, Prefix: k.Prefix, Description: k.Description, Scopes: k.Scopes, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
}

// ExecIn is the exec of req in sandboxID for tenant: stdin_base64 decoded.
func ExecIn(tenant, sandboxID string, req api.ExecRequest) (jobs.ExecInput, error) {
	in := jobs.ExecInput{
		Tenant: tenant, SandboxID: sandboxID, Command: req.Command, Script: req.Script,
		Cwd: req.Cwd, Env: req.Env, Stdin: []byte(req.Stdin), TimeoutMS: req.TimeoutMS, MaxOutputBytes: req.MaxOutputBytes,
		Artifacts: ArtifactSpec(req.Artifacts), StdinStream: req.StdinStream,
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

// ResourcesIn is a request's resources; nil takes the profile's defaults.
func ResourcesIn(r *api.Resources) sandbox.Resources {
	if r == nil {
		return sandbox.Resources{}
	}
	return sandbox.Resources{CPU: r.CPU, MemoryMB: r.MemoryMB, Pids: r.Pids, DiskMB: r.DiskMB}
}

// Resources converts sandbox.Resources to its wire form.
func Resources(r sandbox.Resources) api.Resources {
	return api.Resources{CPU: r.CPU, MemoryMB: r.MemoryMB, Pids: r.Pids, DiskMB: r.DiskMB}
}

// CreateSandboxInput is POST /v1/sandboxes's body for tenant, with the
// request's Idempotency-Key.
func CreateSandboxInput(tenant, idempotencyKey string, req api.CreateSandboxRequest) control.CreateSandboxInput {
	return control.CreateSandboxInput{
		Tenant: tenant, Profile: req.Profile, Runtime: req.Runtime, RiskLevel: req.RiskLevel, Resources: ResourcesIn(req.Resources),
		Env: req.Env, Metadata: req.Metadata, TTLSeconds: req.TTLSeconds, ReadOnlyRoot: req.ReadOnlyRoot,
		IdempotencyKey: idempotencyKey, WaitSeconds: req.WaitSeconds, Network: PolicyIn(req.Network),
		Volumes: VolumeRequests(req.Volumes),
	}
}

// AcquireLeaseInput is POST /v1/leases's body for tenant (its mcp list
// apart: MCPCreateIn).
func AcquireLeaseInput(tenant string, req api.AcquireLeaseRequest) control.AcquireLeaseInput {
	return control.AcquireLeaseInput{
		Tenant: tenant, Profile: req.Profile, RiskLevel: req.RiskLevel, Runtime: req.Runtime,
		TTLSeconds: req.TTLSeconds, Holder: req.Holder, WaitSeconds: req.WaitSeconds, Env: req.Env, Metadata: req.Metadata,
		Resources: ResourcesIn(req.Resources), Network: PolicyIn(req.Network), SnapshotID: req.SnapshotID,
		Volumes: VolumeRequests(req.Volumes),
	}
}

// VolumeRequests is a create or lease request's volumes.
func VolumeRequests(in []api.VolumeMount) []sandbox.VolumeRequest {
	if len(in) == 0 {
		return nil
	}
	out := make([]sandbox.VolumeRequest, len(in))
	for i, m := range in {
		out[i] = sandbox.VolumeRequest{Volume: m.Volume, Path: m.Path, ReadOnly: m.ReadOnly}
	}
	return out
}

// Volume is a named volume as the API shows it.
func Volume(v *sandbox.Volume) api.Volume {
	out := api.Volume{ID: v.ID, Name: v.Name, SizeMB: v.SizeMB, State: string(v.State), Mounts: []api.VolumeHolder{},
		CreatedAt: v.CreatedAt, UpdatedAt: v.UpdatedAt}
	for _, m := range v.Mounts {
		out.Mounts = append(out.Mounts, api.VolumeHolder{SandboxID: m.SandboxID, Path: m.Path, ReadOnly: m.ReadOnly})
	}
	return out
}

// ServiceStatus converts jobs.ServiceState to its wire form.
func ServiceStatus(st jobs.ServiceState) api.ServiceStatus {
	return api.ServiceStatus{Name: st.Name, State: st.State, JobID: st.JobID, Restarts: st.Restarts, LastExitCode: st.LastExit,
		Error: st.Error, Since: st.Since, ReadyAt: st.Ready}
}

// DiskQuota converts control.DiskQuotaStatus to its wire form.
func DiskQuota(dq control.DiskQuotaStatus) api.Feature {
	return api.Feature{Supported: dq.Enforced, Enforced: dq.Enforced, Method: dq.Method, Reason: dq.Reason}
}

// NetworkEvents converts control.NetworkEventsPage to its wire form.
func NetworkEvents(page control.NetworkEventsPage) api.NetworkEventList {
	out := api.NetworkEventList{Items: make([]api.NetworkEvent, len(page.Events)), NextCursor: strconv.FormatInt(page.Next, 10)}
	for i, e := range page.Events {
		out.Items[i] = NetworkEvent(e)
	}
	return out
}

// NetworkEvent is one egress event of a sandbox (its sandbox is the
// route's).
func NetworkEvent(e sandbox.NetworkEvent) api.NetworkEvent {
	return api.NetworkEvent{Cursor: e.Cursor, Time: e.Time, DurationMS: e.DurationMS, Name: e.Name, Address: e.Address, Port: e.Port,
		Proto: e.Proto, Decision: e.Decision, Reason: e.Reason, BytesUp: e.BytesUp, BytesDown: e.BytesDown}
}

// RunCode converts *jobs.RunResult to its wire form.
func RunCode(res *jobs.RunResult) api.RunCodeResult {
	out := api.RunCodeResult{
		JobID: res.Exec.Job.ID, Status: res.Status, Stdout: string(res.Exec.Stdout), Stderr: string(res.Exec.Stderr),
		Value: res.Value, DurationMS: res.Exec.DurationMS, Outputs: []api.RichOutput{}, Warnings: res.Warnings,
	}
	if res.Error != nil {
		out.Error = &api.CodeError{Name: res.Error.Name, Value: res.Error.Value, Traceback: res.Error.Traceback}
	}
	for _, o := range res.Outputs {
		out.Outputs = append(out.Outputs, api.RichOutput(o))
	}
	return out
}

// TenantInput converts the request's api.CreateTenantRequest to the domain's tenancy.TenantInput.
func TenantInput(req api.CreateTenantRequest) tenancy.TenantInput {
	in := tenancy.TenantInput{Name: req.Name, Weight: req.Weight, MinRiskLevel: req.MinRiskLevel, MaxToolRiskLevel: req.MaxToolRiskLevel, Admin: req.Admin}
	if q := req.Quotas; q != nil {
		in.Quotas = tenant.Quotas{MaxSandboxes: q.MaxSandboxes, MaxCPU: q.MaxCPU, MaxMemoryMB: q.MaxMemoryMB, MaxLeases: q.MaxLeases,
			MaxVolumes: q.MaxVolumes, MaxVolumeMB: q.MaxVolumeMB}
	}
	return in
}

// TenantPatch converts the request's api.UpdateTenantRequest to the domain's tenancy.TenantPatch.
func TenantPatch(req api.UpdateTenantRequest) tenancy.TenantPatch {
	p := tenancy.TenantPatch{Weight: req.Weight, MinRiskLevel: req.MinRiskLevel, MaxToolRiskLevel: req.MaxToolRiskLevel, Admin: req.Admin}
	if q := req.Quotas; q != nil {
		p.Quotas = tenancy.QuotasPatch{MaxSandboxes: q.MaxSandboxes, MaxCPU: q.MaxCPU, MaxMemoryMB: q.MaxMemoryMB, MaxLeases: q.MaxLeases,
			MaxVolumes: q.MaxVolumes, MaxVolumeMB: q.MaxVolumeMB}
	}
	return p
}

// AuditRecord converts *tenant.AuditRecord to its wire form.
func AuditRecord(a *tenant.AuditRecord) api.AuditRecord {
	return api.AuditRecord{Seq: a.Seq, Time: a.Time, Actor: a.Actor, Tenant: a.Tenant, Action: a.Action,
		Target: a.Target, Status: a.Status, Code: a.Code, RequestID: a.RequestID, Remote: a.Remote}
}

// AuditPage converts one page of audit records to its wire form: list is
// read with one record more than limit, which tells that another page
// follows; cursor is where the page started.
func AuditPage(list []*tenant.AuditRecord, limit int, cursor int64) api.AuditPage {
	page := api.AuditPage{Items: []api.AuditRecord{}, NextCursor: strconv.FormatInt(cursor, 10)}
	if len(list) > limit {
		list, page.HasMore = list[:limit], true
	}
	for _, a := range list {
		page.Items = append(page.Items, AuditRecord(a))
		page.NextCursor = strconv.FormatInt(a.Seq, 10)
	}
	return page
}

// ArtifactList is GET /v1/jobs/{id}/artifacts: the job's artifact
// request (state "none" when it made none) and what it kept.
func ArtifactList(jobID string, c *sandbox.ArtifactCollection, list []*sandbox.Artifact) api.ArtifactList {
	out := api.ArtifactList{JobID: jobID, State: "none", Requested: []string{}, Items: []api.Artifact{}, Skipped: []api.SkippedArtifact{}}
	if c != nil {
		out.State, out.Requested, out.Error = string(c.State), c.Spec.Paths, c.Error
		for _, sk := range c.Skipped {
			out.Skipped = append(out.Skipped, api.SkippedArtifact{Path: sk.Path, Size: sk.Size, Reason: sk.Reason, Detail: sk.Detail})
		}
	}
	for _, a := range list {
		out.Items = append(out.Items, Artifact(a))
	}
	return out
}

// Whoami converts tenant.Principal to its wire form.
func Whoami(p tenant.Principal) api.Whoami {
	return api.Whoami{Tenant: p.Tenant, KeyID: p.KeyID, Admin: p.Admin, Scopes: p.Scopes}
}

// BrowserStatus is a browser's status with its endpoints below base
// (the sandbox's /browser root through the service).
func BrowserStatus(st *browser.Status, base string) api.BrowserStatus {
	out := api.BrowserStatus{SandboxID: st.SandboxID, Ready: st.Ready, Browser: st.Browser, Versions: st.Versions,
		DownloadsDir: st.DownloadsDir, Session: st.Session, CDPURL: base}
	if st.Playwright {
		out.PlaywrightURL = "ws" + strings.TrimPrefix(base, "http") + "/playwright"
	}
	return out
}

// BrowserActions is a batch's answer: each action's value (any JSON
// value the browser returned) encoded, a kept screenshot as its artifact.
func BrowserActions(res *browser.ActionsResult) api.BrowserActionsResult {
	out := api.BrowserActionsResult{OK: res.OK, URL: res.URL, Title: res.Title, Tab: res.Tab,
		Results: make([]api.BrowserActionResult, len(res.Results))}
	for i, ar := range res.Results {
		cr := api.BrowserActionResult{Index: ar.Index, Type: ar.Type, OK: ar.OK, Ms: ar.Ms, Error: ar.Error}
		if ar.Value != nil {
			if b, err := json.Marshal(ar.Value); err == nil {
				cr.Value = b
			}
		}
		if ar.Artifact != nil {
			a := Artifact(ar.Artifact)
			cr.Artifact = &a
		}
		out.Results[i] = cr
	}
	return out
}

// BrowserDownload converts browser.Download to its wire form.
func BrowserDownload(d browser.Download) api.BrowserDownload {
	out := api.BrowserDownload{Name: d.Name, Path: d.Path, Size: d.Size, SHA256: d.SHA256, ModTime: d.ModTime.UTC(), Partial: d.Partial}
	if d.Artifact != nil {
		a := Artifact(d.Artifact)
		out.Artifact = &a
	}
	return out
}

// BrowserDownloads converts a list of downloads to its wire form.
func BrowserDownloads(list []browser.Download) api.BrowserDownloadList {
	out := api.BrowserDownloadList{Items: make([]api.BrowserDownload, len(list))}
	for i, d := range list {
		out.Items[i] = BrowserDownload(d)
	}
	return out
}

// BrowserProfile converts *browser.ProfileResult to its wire form.
func BrowserProfile(res *browser.ProfileResult) api.BrowserProfile {
	return api.BrowserProfile{SandboxID: res.SandboxID, Artifact: Artifact(res.Artifact),
		Entries: res.Entries, Bytes: res.Bytes, DurationMS: res.DurationMS}
}

// MCPCreateIn is an MCP server's create request (POST /v1/mcp/servers, or
// one of the mcp list of a lease's acquire).
func MCPCreateIn(req api.MCPCreateRequest) servers.CreateRequest {
	out := servers.CreateRequest{Catalog: req.Catalog, Scope: req.Scope, LeaseID: req.LeaseID, Runtime: sandbox.Runtime(req.Runtime),
		PinMode: mcp.PinMode(req.PinMode), IdleTTLSeconds: req.IdleTTLSeconds, CallTimeoutMS: req.CallTimeoutMS,
		CallCeilingMS: req.CallCeilingMS, InitTimeoutMS: req.InitTimeoutMS, ApprovalTTLSeconds: req.ApprovalTTLSeconds}
	if req.Tools != nil {
		out.Tools = mcp.Rules(*req.Tools)
	}
	if sp := req.Spec; sp != nil {
		out.Spec = &servers.Spec{Command: sp.Command, Cwd: sp.Cwd, Env: sp.Env, Profile: sp.Profile,
			Transport: sp.Transport, Port: sp.Port, Path: sp.Path}
		if sp.Permissions != nil {
			out.Spec.Permissions = servers.Permissions(*sp.Permissions)
		}
	}
	return out
}

// MCPServer is an MCP server instance as the API shows it.
func MCPServer(in *servers.Instance) api.MCPServer {
	d := in.Decision
	out := api.MCPServer{ID: in.ID, Tenant: in.Tenant, Catalog: in.Catalog, Command: in.Command, Profile: in.Profile, Scope: in.Scope,
		Endpoint: in.Endpoint, Token: in.Token, CreatedBy: in.CreatedBy, LeaseID: in.LeaseID, OwnLease: in.OwnLease, SandboxID: in.SandboxID, JobID: in.JobID,
		Runtime: string(in.Runtime), Risk: string(in.Risk), Network: in.Network,
		Decision: api.MCPDecision{Source: string(d.Source), SourceRisk: string(d.SourceRisk), PermissionRisk: string(d.PermissionRisk),
			Risk: string(d.Risk), Ceiling: string(d.Ceiling), CeilingFrom: d.CeilingFrom, Rule: d.Rule, MinRuntime: string(d.Isolation),
			Network: d.Network, Hosts: d.Hosts, Tools: d.Tools, Secrets: d.Secrets},
		State: in.State, Restarts: in.Restarts, OutputRestarts: in.OutputRestarts, LastExitCode: in.LastExitCode, LastError: in.LastError,
		ProtocolVersion: in.ProtocolVersion, Tools: api.MCPToolRules(in.Tools), PinMode: string(in.PinMode), IdleTTLSeconds: in.IdleTTLSeconds,
		CreatedAt: in.CreatedAt, ReadyAt: in.ReadyAt, LastUsedAt: in.LastUsedAt, Secrets: in.Secrets}
	if im := in.Server; im != nil {
		out.Server = &api.MCPImplementation{Name: im.Name, Title: im.Title, Description: im.Description, Version: im.Version,
			WebsiteURL: im.WebsiteURL}
		for _, icon := range im.Icons {
			if b, err := json.Marshal(icon); err == nil {
				out.Server.Icons = append(out.Server.Icons, b)
			}
		}
	}
	return out
}

// The file routes' bodies and answers are the agent protocol's shapes,
// field for field: the flat ones convert as Go conversions (a field added
// to one side only does not compile), the nested ones here.

// FileList converts files.FileList to its wire form.
func FileList(l files.FileList) api.FileList {
	out := api.FileList{Path: l.Path, Truncated: l.Truncated, Entries: make([]api.FileInfo, len(l.Entries))}
	for i, e := range l.Entries {
		out.Entries[i] = api.FileInfo(e)
	}
	return out
}

// Search converts files.SearchResult to its wire form.
func Search(r files.SearchResult) api.SearchResult {
	out := api.SearchResult{Truncated: r.Truncated, TimedOut: r.TimedOut, FilesScanned: r.FilesScanned, FilesSkipped: r.FilesSkipped}
	if r.Matches != nil {
		out.Matches = make([]api.SearchMatch, len(r.Matches))
	}
	for i, m := range r.Matches {
		out.Matches[i] = api.SearchMatch(m)
	}
	return out
}

// Replace converts files.ReplaceResult to its wire form.
func Replace(r files.ReplaceResult) api.ReplaceResult {
	out := api.ReplaceResult{Replacements: r.Replacements, FilesChanged: r.FilesChanged, Failed: r.Failed, Truncated: r.Truncated, DryRun: r.DryRun}
	if r.Files != nil {
		out.Files = make([]api.ReplaceFile, len(r.Files))
	}
	for i, f := range r.Files {
		out.Files[i] = api.ReplaceFile(f)
	}
	return out
}

// ExitEvent is the exit event of a job's log stream from its record
// (a job whose log holds no exit: lost, or ended before it was kept).
func ExitEvent(j *sandbox.Job) api.ExitEvent {
	return api.ExitEvent{
		JobID: j.ID, State: string(j.State), ExitCode: j.ExitCode, ExitReason: string(j.ExitReason),
		Signal: j.Signal, Error: j.Error, StdoutBytes: j.StdoutBytes, StderrBytes: j.StderrBytes,
		StdoutTruncated: j.StdoutTruncated, StderrTruncated: j.StderrTruncated,
	}
}

// LogExit is the exit event of a job's log stream (jobs.ExitOfEvent).
func LogExit(x jobs.LogExit) api.ExitEvent {
	return api.ExitEvent{
		JobID: x.JobID, State: string(x.State), ExitCode: x.ExitCode, ExitReason: x.ExitReason, Signal: x.Signal, Error: x.Error,
		StdoutBytes: x.StdoutBytes, StderrBytes: x.StderrBytes,
		StdoutTruncated: x.StdoutTruncated, StderrTruncated: x.StderrTruncated, DurationMS: x.DurationMS,
	}
}

// TraceEvents is a page of trace events (never null: an empty page is
// an empty list). An event is the trace's own shape, field for field.
func TraceEvents(evs []trace.Event) []api.TraceEvent {
	out := make([]api.TraceEvent, len(evs))
	for i, e := range evs {
		out[i] = TraceEvent(e)
	}
	return out
}

// TraceEvent converts trace.Event to its wire form.
func TraceEvent(e trace.Event) api.TraceEvent {
	return api.TraceEvent{Seq: e.Seq, Time: e.Time, Actor: e.Actor, Kind: string(e.Kind), Data: e.Data}
}

// Interruption is a sandbox's interrupt state and the jobs an abort
// canceled.
func Interruption(st trace.Interruption, canceled []string) api.TraceInterruption {
	return api.TraceInterruption{State: st.State, Steps: st.Steps, CanceledJobs: canceled}
}

// SkillRevisions is a list of revisions (never null).
func SkillRevisions(list []*skills.Revision) []api.SkillRevision {
	out := make([]api.SkillRevision, len(list))
	for i, r := range list {
		out[i] = SkillRevision(r)
	}
	return out
}

// SkillRevision converts *skills.Revision to its wire form.
func SkillRevision(r *skills.Revision) api.SkillRevision {
	out := api.SkillRevision{Tenant: r.Tenant, Name: r.Name, Revision: r.Revision, Digest: r.Digest, Size: r.Size, Source: r.Source,
		Manifest: api.SkillManifest(r.Manifest), CreatedAt: r.CreatedAt,
		Report: api.SkillReport{Scripts: r.Report.Scripts, Hosts: r.Report.Hosts, URLs: r.Report.URLs, UndeclaredHosts: r.Report.Undeclared}}
	if r.Files != nil {
		out.Files = make([]api.SkillFile, len(r.Files))
	}
	for i, f := range r.Files {
		out.Files[i] = api.SkillFile{Path: f.Path, Executable: f.Executable, Size: f.Size, SHA256: f.SHA256}
	}
	if r.Report.Secrets != nil {
		out.Report.Secrets = make([]api.SkillSecretFinding, len(r.Report.Secrets))
	}
	for i, f := range r.Report.Secrets {
		out.Report.Secrets[i] = api.SkillSecretFinding(f)
	}
	return out
}

// SkillRunIn converts the request's api.SkillRunRequest to the domain's skills.RunRequest.
func SkillRunIn(req api.SkillRunRequest) skills.RunRequest {
	out := skills.RunRequest{Revision: req.Revision, Script: req.Script, Args: req.Args, Stdin: req.Stdin, StdinBase64: req.StdinBase64,
		TimeoutMS: req.TimeoutMS}
	if req.Files != nil {
		out.Files = make([]skills.InputFile, len(req.Files))
	}
	for i, f := range req.Files {
		out.Files[i] = skills.InputFile(f)
	}
	return out
}

// SkillRun is a finished run with its artifacts in their API form.
func SkillRun(run *skills.Run) api.SkillRun {
	d := run.Decision
	out := api.SkillRun{Skill: run.Skill, Revision: run.Revision, Digest: run.Digest, Script: run.Script, Command: run.Command,
		SandboxID: run.SandboxID, JobID: run.JobID, Profile: run.Profile,
		Decision: api.SkillRunDecision{Source: d.Source, SourceRisk: string(d.SourceRisk), PermissionRisk: string(d.PermissionRisk),
			Risk: string(d.Risk), Ceiling: string(d.Ceiling), CeilingFrom: d.CeilingFrom, Runtime: string(d.Runtime),
			Network: d.Network, Hosts: d.Hosts, Rule: d.Rule},
		State: run.State, ExitCode: run.ExitCode, ExitReason: run.ExitReason, Stdout: run.Stdout, Stderr: run.Stderr,
		StdoutTruncated: run.StdoutTruncated, StderrTruncated: run.StderrTruncated, DurationMS: run.DurationMS,
		Artifacts: []api.Artifact{}, StartedAt: run.StartedAt, FinishedAt: run.FinishedAt}
	for _, a := range run.Artifacts {
		out.Artifacts = append(out.Artifacts, Artifact(a))
	}
	return out
}

// MCPPin converts mcp.Pin to its wire form.
func MCPPin(p mcp.Pin) api.MCPPin {
	out := api.MCPPin{Tool: p.Tool, Hash: p.Hash, PinnedAt: p.PinnedAt, Definition: p.Definition}
	if c := p.Changed; c != nil {
		out.Changed = &api.MCPPinChange{Hash: c.Hash, SeenAt: c.SeenAt, Definition: c.Definition, Blocked: c.Blocked}
	}
	return out
}

// MCPPins is a list of pins (nil stays nil).
func MCPPins(pins []mcp.Pin) []api.MCPPin {
	if pins == nil {
		return nil
	}
	out := make([]api.MCPPin, len(pins))
	for i, p := range pins {
		out[i] = MCPPin(p)
	}
	return out
}

// MCPApproval converts *servers.Approval to its wire form.
func MCPApproval(a *servers.Approval) api.MCPApproval {
	return api.MCPApproval{ID: a.ID, Instance: a.Instance, Tool: a.Tool, Arguments: a.Arguments, ArgsDigest: a.ArgsDigest,
		Session: a.Session, Client: a.Client, State: a.State, CreatedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt,
		DecidedAt: a.DecidedAt, DecidedBy: a.DecidedBy, Reason: a.Reason}
}

// MCPCatalogEntry converts *servers.Entry to its wire form.
func MCPCatalogEntry(e *servers.Entry) api.MCPCatalogEntry {
	return api.MCPCatalogEntry{Name: e.Name, Description: e.Description, Source: string(e.Source), Profile: e.Profile,
		Command: e.Command, Cwd: e.Cwd, Env: e.Env, Transport: e.Transport, Port: e.Port, Path: e.Path,
		Permissions: api.MCPPermissions(e.Permissions), Tools: api.MCPToolRules(e.Tools), Pins: MCPPins(e.Pins),
		Owner: e.Owner, CreatedAt: e.CreatedAt}
}

// Snapshot converts *sandbox.Snapshot to its wire form.
func Snapshot(sn *sandbox.Snapshot) api.Snapshot {
	return api.Snapshot{ID: sn.ID, Name: sn.Name, SandboxID: sn.SandboxID, Parent: sn.Parent, State: string(sn.State),
		Profile: sn.Profile, Runtime: string(sn.Runtime), RiskLevel: string(sn.RiskLevel), Resources: Resources(sn.Resources),
		Memory: sn.Memory, SizeBytes: sn.SizeBytes, Error: sn.Error, CreatedAt: sn.CreatedAt, ExpiresAt: sn.ExpiresAt}
}

// Made is a sandbox made from a snapshot as the API shows it.
func Made(c *snapshots.Made) api.Sandbox {
	sb := Sandbox(c.Sandbox)
	memory := c.Memory
	sb.MemoryRestored = &memory
	sb.SessionsFromSnapshot = c.Sessions
	return sb
}

// ForkInput is what each copy of a fork is made with (the count apart).
func ForkInput(req api.ForkRequest) control.CreateSandboxInput {
	return control.CreateSandboxInput{TTLSeconds: req.TTLSeconds, Metadata: req.Metadata}
}

// Diff is a workspace's changes (a nil list stays null, as the
// domain's was).
func Diff(r *changes.Result) api.Diff {
	out := api.Diff{Base: r.Base, Summary: api.DiffSummary(r.Summary), Truncated: r.Truncated, TruncatedReason: r.TruncatedReason}
	if r.Files != nil {
		out.Files = make([]api.DiffFile, len(r.Files))
	}
	for i, f := range r.Files {
		out.Files[i] = api.DiffFile{Path: f.Path, Status: string(f.Status), OldMode: f.OldMode, NewMode: f.NewMode, OldSize: f.OldSize, NewSize: f.NewSize,
			Binary: f.Binary, TooLarge: f.TooLarge, Additions: f.Additions, Deletions: f.Deletions, Diff: f.Diff}
	}
	return out
}

// PatchResult is what a patch changed (a nil list stays null, as the
// domain's was).
func PatchResult(r *changes.PatchResult) api.PatchResult {
	out := api.PatchResult{Applied: r.Applied, DryRun: r.DryRun}
	if r.Files != nil {
		out.Files = make([]api.PatchedFile, len(r.Files))
	}
	for i, f := range r.Files {
		out.Files[i] = api.PatchedFile{Path: f.Path, Status: string(f.Status), From: f.From, Size: f.Size, Mode: f.Mode}
	}
	return out
}
