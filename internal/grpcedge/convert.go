package grpcedge

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"genesis.dev/sandbox/api"
	sandboxv1 "genesis.dev/sandbox/gen/genesis/sandbox/v1"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
)

// Every conversion between a domain type and a message of
// genesis.sandbox.v1 is in this file (as httpapi's are in its wire.go).

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func tsp(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return ts(*t)
}

func int32p(v *int) *int32 {
	if v == nil {
		return nil
	}
	x := int32(*v)
	return &x
}

func resourcesIn(r *sandboxv1.Resources) sandbox.Resources {
	if r == nil {
		return sandbox.Resources{}
	}
	return sandbox.Resources{CPU: r.Cpu, MemoryMB: r.MemoryMb, Pids: r.Pids, DiskMB: r.DiskMb}
}

func resourcesPB(r sandbox.Resources) *sandboxv1.Resources {
	return &sandboxv1.Resources{Cpu: r.CPU, MemoryMb: r.MemoryMB, Pids: r.Pids, DiskMb: r.DiskMB}
}

func runtimeNames(rs []sandbox.Runtime) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}

func sandboxPB(sb *sandbox.Sandbox) *sandboxv1.Sandbox {
	out := &sandboxv1.Sandbox{
		Id: sb.ID, Tenant: sb.Tenant, State: string(sb.State), Profile: sb.Profile, Runtime: string(sb.Runtime),
		RiskLevel: string(sb.RiskLevel), Image: sb.Image, Resources: resourcesPB(sb.Resources), Metadata: sb.Metadata,
		FailureReason: sb.FailureReason, ResourceVersion: strconv.FormatInt(sb.ResourceVersion, 10),
		CreateTime: ts(sb.CreatedAt), UpdateTime: ts(sb.UpdatedAt), ExpireTime: tsp(sb.ExpiresAt), Reserved: sb.Reserved,
	}
	if n := sb.Network; n != nil {
		out.Network = &sandboxv1.NetworkSummary{Mode: string(n.Mode), Status: string(n.Status), StatusReason: n.StatusReason}
	}
	if su := sb.Suspension; su != nil {
		out.Suspension = &sandboxv1.Suspension{ResumeState: string(su.ResumeState), Operation: su.Operation, Memory: su.Memory, Since: ts(su.Since)}
	}
	for k := range sb.Env {
		out.EnvKeys = append(out.EnvKeys, k)
	}
	slices.Sort(out.EnvKeys)
	return out
}

func leasePB(l *sandbox.Lease) *sandboxv1.Lease {
	return &sandboxv1.Lease{
		LeaseId: l.ID, SandboxId: l.SandboxID, State: string(l.State), Warm: l.Warm, Profile: l.Profile,
		Runtime: string(l.Runtime), Holder: l.Holder, Metadata: l.Metadata, TtlSeconds: l.TTLSeconds,
		ResourceVersion: strconv.FormatInt(l.ResourceVersion, 10),
		CreateTime:      ts(l.CreatedAt), RenewTime: ts(l.RenewedAt), ExpireTime: ts(l.ExpiresAt), EndTime: tsp(l.EndedAt),
		EndReason: l.EndReason, Reserved: l.Reserved,
	}
}

func profilePB(v control.ProfileView) *sandboxv1.Profile {
	p := &sandboxv1.Profile{
		Name: v.Name, Description: v.Description, Image: v.ImageRef, ImageStatus: control.ImageStatus(v.ImagePresent, v.ImageBuild),
		AllowedRuntimes: runtimeNames(v.AllowedRuntimes), UsableRuntimes: runtimeNames(v.UsableRuntimes),
		DefaultResources: resourcesPB(v.Resources), Network: string(v.Network.Mode), User: v.User, ReadOnlyRoot: v.ReadOnlyRoot,
		FileRoots: v.Roots(), Versions: v.Versions, LeaseDefaultTtlSeconds: v.LeaseDefaultTTL, LeaseMaxTtlSeconds: v.LeaseMaxTTL,
	}
	if !v.ImagePresent {
		p.BuildCommand = v.BuildCommand
	}
	return p
}

func jobPB(j *sandbox.Job) *sandboxv1.Job {
	return &sandboxv1.Job{
		Id: j.ID, SandboxId: j.SandboxID, State: string(j.State), Command: j.Command, Script: j.Script, Cwd: j.Cwd,
		ExitCode: int32p(j.ExitCode), ExitReason: string(j.ExitReason), Signal: j.Signal, Error: j.Error,
		StdoutBytes: j.StdoutBytes, StderrBytes: j.StderrBytes, StdoutTruncated: j.StdoutTruncated, StderrTruncated: j.StderrTruncated,
		TimeoutMs: j.TimeoutMS, Mode: string(j.Mode), CreateTime: ts(j.CreatedAt), StartTime: tsp(j.StartedAt), FinishTime: tsp(j.FinishedAt),
	}
}

func execResultPB(out *jobs.ExecOutput) *sandboxv1.ExecResult {
	j := out.Job
	res := &sandboxv1.ExecResult{
		JobId: j.ID, ExitReason: string(j.ExitReason), Signal: j.Signal, Stdout: out.Stdout, Stderr: out.Stderr,
		StdoutTruncated: j.StdoutTruncated, StderrTruncated: j.StderrTruncated,
		StdoutBytes: j.StdoutBytes, StderrBytes: j.StderrBytes, DurationMs: out.DurationMS,
	}
	if j.ExitCode != nil {
		res.ExitCode = int32(*j.ExitCode)
	}
	return res
}

func exitPB(x jobs.LogExit) *sandboxv1.Exit {
	return &sandboxv1.Exit{
		JobId: x.JobID, State: string(x.State), ExitCode: int32p(x.ExitCode), ExitReason: x.ExitReason, Signal: x.Signal, Error: x.Error,
		StdoutBytes: x.StdoutBytes, StderrBytes: x.StderrBytes, StdoutTruncated: x.StdoutTruncated, StderrTruncated: x.StderrTruncated,
		DurationMs: x.DurationMS,
	}
}

// policyIn converts a request's network policy; nil stays nil (the
// default).
func policyIn(p *sandboxv1.NetworkPolicy) *egress.Policy {
	if p == nil {
		return nil
	}
	out := &egress.Policy{Mode: egress.Mode(p.Mode), Endpoints: p.Endpoints, Tools: p.Tools}
	for _, r := range p.Allow {
		ports := make([]int, len(r.Ports))
		for i, port := range r.Ports {
			ports[i] = int(port)
		}
		if len(ports) == 0 {
			ports = nil
		}
		out.Allow = append(out.Allow, egress.Rule{Host: r.Host, CIDR: r.Cidr, Ports: ports})
	}
	return out
}

// serviceStatusPB converts how a sandbox's service runs.
func serviceStatusPB(st jobs.ServiceState) *sandboxv1.ServiceStatus {
	return &sandboxv1.ServiceStatus{Name: st.Name, State: st.State, JobId: st.JobID, Restarts: int32(st.Restarts), LastExitCode: int32p(st.LastExit),
		Error: st.Error, SinceTime: ts(st.Since), ReadyTime: tsp(st.Ready)}
}

// endpointsPB are the named ports of profile p for sandbox id with their
// URLs under publicURL (as the HTTP API's GET answer lists them).
func endpointsPB(publicURL, id string, p *config.Profile) []*sandboxv1.Endpoint {
	if p == nil {
		return nil
	}
	var out []*sandboxv1.Endpoint
	for _, e := range p.Endpoints {
		proto := cmp.Or(e.Protocol, "http")
		u := publicURL + api.PortPath(id, e.Port)
		if proto == "tcp" {
			u = "ws" + strings.TrimPrefix(u, "http") + "tcp"
		}
		out = append(out, &sandboxv1.Endpoint{Name: e.Name, Port: int32(e.Port), Protocol: proto, Url: u})
	}
	return out
}
