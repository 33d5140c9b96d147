package skills

import (
	"context"
	"encoding/base64"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/egress"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/files"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/policy"
	"genesis.dev/sandbox/internal/sandbox"
)

// RunRequest is the body of POST /v1/skills/{name}/runs.
type RunRequest struct {
	// Revision is the revision to run (0: the latest).
	Revision int64 `json:"revision,omitempty"`
	// Script is the path of one of the revision's files, relative to the
	// skill's root (e.g. scripts/fill.py).
	Script string   `json:"script"`
	Args   []string `json:"args,omitempty"`
	Stdin  string   `json:"stdin,omitempty"`
	// StdinBase64 is stdin as base64, for bytes that are not text.
	StdinBase64 string `json:"stdin_base64,omitempty"`
	// Files are written to the workspace before the script starts.
	Files     []InputFile `json:"files,omitempty"`
	TimeoutMS int64       `json:"timeout_ms,omitempty"`
}

// InputFile is a file a run puts in its workspace: Content as text, or
// ContentBase64.
type InputFile struct {
	// Path is relative to /workspace.
	Path          string `json:"path"`
	Content       string `json:"content,omitempty"`
	ContentBase64 string `json:"content_base64,omitempty"`
}

// Decision is where a run runs, with the inputs and the rule.
type Decision struct {
	Source         string            `json:"source"`
	SourceRisk     sandbox.RiskLevel `json:"source_risk"`
	PermissionRisk sandbox.RiskLevel `json:"permission_risk"`
	Risk           sandbox.RiskLevel `json:"risk"`
	Ceiling        sandbox.RiskLevel `json:"ceiling"`
	// CeilingFrom says whose ceiling it is: operator or tenant (the
	// tenant's max_tool_risk_level, when lower).
	CeilingFrom string          `json:"ceiling_from,omitempty"`
	Runtime     sandbox.Runtime `json:"runtime"`
	// Network is none or allowlist (with Hosts).
	Network string   `json:"network"`
	Hosts   []string `json:"hosts,omitempty"`
	Rule    string   `json:"rule"`
}

// Run is a finished run of a skill's script.
type Run struct {
	Skill     string   `json:"skill"`
	Revision  int64    `json:"revision"`
	Digest    string   `json:"digest"`
	Script    string   `json:"script"`
	Command   []string `json:"command"`
	SandboxID string   `json:"sandbox_id"`
	JobID     string   `json:"job_id"`
	Profile   string   `json:"profile"`
	Decision  Decision `json:"decision"`
	// State is the job's final state: succeeded, or failed (ExitReason says
	// how: exited, timeout, signal, oom, …).
	State           string              `json:"state"`
	ExitCode        *int                `json:"exit_code,omitempty"`
	ExitReason      string              `json:"exit_reason,omitempty"`
	Stdout          string              `json:"stdout"`
	Stderr          string              `json:"stderr"`
	StdoutTruncated bool                `json:"stdout_truncated"`
	StderrTruncated bool                `json:"stderr_truncated"`
	DurationMS      int64               `json:"duration_ms"`
	Artifacts       []*sandbox.Artifact `json:"artifacts"`
	StartedAt       time.Time           `json:"started_at"`
	FinishedAt      time.Time           `json:"finished_at"`
}

// Decide applies the risk rule to a revision: a tenant's upload is
// unsigned (risk medium); declaring hosts is risk medium and needs the
// operator's AllowNetwork. The runtime is the weakest that
// policy.MinIsolation allows for the risk: medium and above run under
// runsc. A risk above the ceiling is refused, never relabelled.
func (m *Manager) Decide(ctx context.Context, tenant string, rev *Revision) (Decision, error) {
	ceiling, from, err := m.cfg.TenantCeiling.Ceiling(ctx, tenant, m.cfg.Ceiling)
	if err != nil {
		return Decision{}, err
	}
	d := Decision{Source: rev.Source, SourceRisk: sandbox.RiskMedium, PermissionRisk: sandbox.RiskLow, Ceiling: ceiling, CeilingFrom: from, Network: "none"}
	if len(rev.Manifest.Network) > 0 {
		if !m.cfg.AllowNetwork {
			return d, errdefs.WithCode("skill_network_not_allowed", fmt.Errorf(
				"skill %s declares network %v and this service runs skills without network (skills.allow_network): %w",
				rev.Name, rev.Manifest.Network, errdefs.ErrPermissionDenied))
		}
		d.PermissionRisk, d.Network, d.Hosts = sandbox.RiskMedium, "allowlist", slices.Clone(rev.Manifest.Network)
	}
	d.Risk = d.SourceRisk
	if d.PermissionRisk.Rank() > d.Risk.Rank() {
		d.Risk = d.PermissionRisk
	}
	if d.Risk.Rank() > d.Ceiling.Rank() {
		whose := "the operator's skills.max_risk_level"
		if from == "tenant" {
			whose = "tenant " + tenant + "'s max_tool_risk_level"
		}
		return d, errdefs.WithCode("risk_above_ceiling", fmt.Errorf("skill %s has risk %s, above the ceiling %s (%s); it is refused, not relabelled: %w",
			rev.Name, d.Risk, d.Ceiling, whose, errdefs.ErrPermissionDenied))
	}
	// The runtime rule is the service's (policy.MinIsolation), as for
	// sandboxes and MCP servers: runc only where it isolates enough.
	d.Runtime = sandbox.RuntimeRunc
	if policy.MinIsolation(d.Risk) > sandbox.RuntimeRunc.Isolation() {
		d.Runtime = sandbox.RuntimeRunsc
	}
	d.Rule = fmt.Sprintf("risk = max(source %s → %s, permissions → %s) = %s; %s and above run under runsc; network %s",
		d.Source, d.SourceRisk, d.PermissionRisk, d.Risk, sandbox.RiskMedium, d.Network)
	return d, nil
}

// command is how a script runs: by its language, else directly when it
// is executable.
func command(f *File, head []byte, args []string) ([]string, error) {
	p := MountDir + "/" + f.Path
	var argv []string
	switch Language(f.Path, head) {
	case "python":
		argv = []string{"python3", p}
	case "shell":
		argv = []string{"sh", p}
	case "node":
		argv = []string{"node", p}
	default:
		if !f.Executable {
			return nil, errdefs.WithCode("skill_script_not_runnable", fmt.Errorf(
				"%s is neither a Python, shell or Node script nor executable: %w", f.Path, errdefs.ErrInvalidArgument))
		}
		argv = []string{p}
	}
	return append(argv, args...), nil
}

// checkRunRequest validates what a run request can be checked for alone.
func checkRunRequest(req *RunRequest) error {
	bad := func(code, format string, args ...any) error { return invalid(code, format, args...) }
	switch {
	case req.Script == "":
		return bad("invalid_argument", "script is required: the path of one of the skill's files")
	case req.Revision < 0:
		return bad("invalid_argument", "revision must be positive (or 0 for the latest)")
	case req.TimeoutMS < 0:
		return bad("invalid_argument", "timeout_ms must not be negative")
	case len(req.Files) > maxRunFiles:
		return bad("invalid_argument", "at most %d files", maxRunFiles)
	}
	if p := req.Script; path.IsAbs(p) || !filepath.IsLocal(p) || strings.Contains(p, "\\") {
		return bad("skill_script_outside", "script %q must be a path inside the skill (relative, no ..)", p)
	}
	req.Script = path.Clean(req.Script)
	if req.Stdin != "" && req.StdinBase64 != "" {
		return bad("invalid_argument", "stdin and stdin_base64 are mutually exclusive")
	}
	if req.StdinBase64 != "" {
		if _, err := base64.StdEncoding.DecodeString(req.StdinBase64); err != nil {
			return bad("invalid_argument", "stdin_base64: %v", err)
		}
	}
	for _, f := range req.Files {
		if f.Path == "" || path.IsAbs(f.Path) || !filepath.IsLocal(f.Path) || strings.Contains(f.Path, "\\") {
			return bad("invalid_argument", "file path %q must be relative to the workspace, with no ..", f.Path)
		}
		if f.Content != "" && f.ContentBase64 != "" {
			return bad("invalid_argument", "file %s has both content and content_base64", f.Path)
		}
		if f.ContentBase64 != "" {
			if _, err := base64.StdEncoding.DecodeString(f.ContentBase64); err != nil {
				return bad("invalid_argument", "file %s: content_base64: %v", f.Path, err)
			}
		}
	}
	return nil
}

// Run runs one of a revision's own scripts in a sandbox of its own: the
// revision mounted read-only at /skill (its digest checked first), the
// request's files in /workspace, whatever the script writes below
// /workspace/out kept as artifacts. The sandbox is removed afterwards.
func (m *Manager) Run(ctx context.Context, tenant, name string, req RunRequest) (*Run, error) {
	if err := checkRunRequest(&req); err != nil {
		return nil, err
	}
	rev, err := m.Get(ctx, tenant, name, req.Revision)
	if err != nil {
		return nil, err
	}
	f, ok := findFile(rev.Files, req.Script)
	if !ok {
		return nil, errdefs.WithCode("skill_script_not_found", fmt.Errorf("skill %s revision %d has no file %q: %w",
			rev.Name, rev.Revision, req.Script, errdefs.ErrNotFound))
	}
	dec, err := m.Decide(ctx, tenant, rev)
	if err != nil {
		return nil, err
	}
	dir, err := m.unpacked(ctx, rev.Digest) // the digest, checked on every run
	if err != nil {
		return nil, err
	}
	head, err := m.ReadFile(ctx, rev, f.Path)
	if err != nil {
		return nil, err
	}
	argv, err := command(f, head[:min(len(head), 256)], req.Args)
	if err != nil {
		return nil, err
	}
	timeout := DefaultRunTimeout
	if req.TimeoutMS > 0 {
		timeout = time.Duration(req.TimeoutMS) * time.Millisecond
	}
	pol := &egress.Policy{Mode: egress.ModeNone}
	if dec.Network == "allowlist" {
		pol = allowlist(dec.Hosts)
	}
	started := m.cfg.Now().UTC()
	sb, err := m.cfg.Sandboxes.CreateSandbox(ctx, control.CreateSandboxInput{
		Tenant: tenant, Profile: m.cfg.Profile, Runtime: string(dec.Runtime), RiskLevel: string(dec.Risk),
		Metadata:     map[string]string{"genesis.dev/skill": rev.Name, "genesis.dev/skill-revision": strconv.FormatInt(rev.Revision, 10)},
		TTLSeconds:   int64(timeout/time.Second) + 300,
		Network:      pol,
		ReadOnlyDirs: map[string]string{MountDir: dir},
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := m.cfg.Sandboxes.DeleteSandbox(dctx, tenant, sb.ID); err != nil {
			m.log.Warn("removing a skill run's sandbox", "sandbox", sb.ID, "err", err)
		}
	}()
	if sb.Runtime != dec.Runtime {
		return nil, fmt.Errorf("the run's sandbox runs %s, the decision needs %s: %w", sb.Runtime, dec.Runtime, errdefs.ErrInternal)
	}
	if _, err := m.cfg.Files.Mkdir(ctx, tenant, sb.ID, agentproto.MkdirRequest{Path: OutputDir}); err != nil {
		return nil, err
	}
	for _, in := range req.Files {
		body := []byte(in.Content)
		if in.ContentBase64 != "" {
			body, _ = base64.StdEncoding.DecodeString(in.ContentBase64) // checked above
		}
		if _, err := m.cfg.Files.WriteFile(ctx, files.WriteFileInput{Tenant: tenant, SandboxID: sb.ID, Path: "/workspace/" + in.Path,
			Overwrite: true, Size: int64(len(body)), Body: strings.NewReader(string(body))}); err != nil {
			return nil, fmt.Errorf("writing %s: %w", in.Path, err)
		}
	}
	stdin := []byte(req.Stdin)
	if req.StdinBase64 != "" {
		stdin, _ = base64.StdEncoding.DecodeString(req.StdinBase64) // checked above
	}
	out, err := m.cfg.Jobs.Exec(ctx, jobs.ExecInput{
		Tenant: tenant, SandboxID: sb.ID, Command: argv, Cwd: "/workspace", Stdin: stdin,
		Env:       map[string]string{"SKILL_DIR": MountDir, "SKILL_OUTPUT_DIR": OutputDir, "SKILL_NAME": rev.Name, "SKILL_REVISION": strconv.FormatInt(rev.Revision, 10)},
		TimeoutMS: timeout.Milliseconds(),
		Artifacts: &sandbox.ArtifactSpec{Paths: []string{strings.TrimPrefix(OutputDir, "/workspace/") + "/**"}},
	})
	if err != nil {
		return nil, err
	}
	_, arts, err := m.cfg.Artifacts.JobArtifacts(ctx, tenant, out.Job.ID)
	if err != nil {
		return nil, err
	}
	if arts == nil {
		arts = []*sandbox.Artifact{}
	}
	j := out.Job
	return &Run{
		Skill: rev.Name, Revision: rev.Revision, Digest: rev.Digest, Script: f.Path, Command: argv, SandboxID: sb.ID, JobID: j.ID,
		Profile: m.cfg.Profile, Decision: dec, State: string(j.State), ExitCode: j.ExitCode, ExitReason: string(j.ExitReason),
		Stdout: string(out.Stdout), Stderr: string(out.Stderr), StdoutTruncated: j.StdoutTruncated, StderrTruncated: j.StderrTruncated,
		DurationMS: out.DurationMS, Artifacts: arts, StartedAt: started, FinishedAt: m.cfg.Now().UTC(),
	}, nil
}

// allowlist is the egress policy of exactly the declared hosts: a
// host:port opens that port, a bare host the HTTP and HTTPS ports.
func allowlist(hosts []string) *egress.Policy {
	p := &egress.Policy{Mode: egress.ModeAllowlist}
	for _, h := range hosts {
		r := egress.Rule{Host: h}
		if i := strings.LastIndexByte(h, ':'); i > 0 {
			if n, err := strconv.Atoi(h[i+1:]); err == nil {
				r = egress.Rule{Host: h[:i], Ports: []int{n}}
			}
		}
		p.Allow = append(p.Allow, r)
	}
	return p
}
