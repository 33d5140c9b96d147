package api

import "time"

// Content types a skill push accepts; the archive's own bytes decide how it
// is read.
const (
	SkillArchiveGzip  = "application/gzip"
	SkillArchiveTar   = "application/x-tar"
	SkillArchiveZip   = "application/zip"
	SkillArchiveBytes = "application/octet-stream"
)

// SkillManifest is the YAML front matter of a skill's SKILL.md.
type SkillManifest struct {
	// Name is lowercase letters, digits and single hyphens, at most 64.
	Name        string `json:"name"`
	Description string `json:"description"`
	License     string `json:"license,omitempty"`
	// AllowedTools is the front matter's allowed-tools.
	AllowedTools []string          `json:"allowed_tools,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	// Network is the hosts (host or host:port) its scripts must reach,
	// from metadata "network" (comma-separated). Empty: none.
	Network []string `json:"network,omitempty"`
}

// SkillFile is one regular file of a revision. Path is slash-separated,
// relative to the skill's root.
type SkillFile struct {
	Path string `json:"path"`
	// Executable is true when an execute bit was set in the archive; it
	// is the only mode bit kept.
	Executable bool   `json:"executable,omitempty"`
	Size       int64  `json:"size"`
	SHA256     string `json:"sha256"`
}

// SkillSecretFinding is one secret-like string of a revision: where and
// what kind, never the value.
type SkillSecretFinding struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Kind string `json:"kind"`
}

// SkillReport is what a static look at a revision found. It informs a
// reviewer; it enforces nothing.
type SkillReport struct {
	// Scripts maps a language (python, shell, node, other) to the paths of
	// the revision's scripts in it.
	Scripts map[string][]string `json:"scripts"`
	// Hosts are the distinct hosts of the URLs in its text files.
	Hosts []string `json:"hosts"`
	// URLs are the distinct URLs (at most 100).
	URLs    []string             `json:"urls"`
	Secrets []SkillSecretFinding `json:"secrets"`
	// UndeclaredHosts are hosts the files name that the manifest's network
	// does not declare (a script that reaches one will fail).
	UndeclaredHosts []string `json:"undeclared_hosts"`
}

// SkillRevision is one immutable revision of a skill.
type SkillRevision struct {
	Tenant   string `json:"tenant"`
	Name     string `json:"name"`
	Revision int64  `json:"revision"`
	// Digest is "sha256:<hex>" of the files' paths, contents and execute
	// bits, whatever the archive's format.
	Digest string `json:"digest"`
	// Size is the sum of the files' sizes.
	Size int64 `json:"size"`
	// Source is tenant (an upload: unsigned, risk medium).
	Source    string        `json:"source"`
	Manifest  SkillManifest `json:"manifest"`
	Files     []SkillFile   `json:"files"`
	Report    SkillReport   `json:"report"`
	CreatedAt time.Time     `json:"created_at"`
}

// SkillList is the body of GET /v1/skills: the latest revision of each
// skill.
type SkillList struct {
	Items []SkillRevision `json:"items"`
}

// SkillRevisionList is the body of GET /v1/skills/{name}/revisions,
// newest first.
type SkillRevisionList struct {
	Items []SkillRevision `json:"items"`
}

// SkillInputFile is a file a run writes to its workspace before the script
// starts: Content as text, or ContentBase64.
type SkillInputFile struct {
	// Path is relative to /workspace.
	Path          string `json:"path"`
	Content       string `json:"content,omitempty"`
	ContentBase64 string `json:"content_base64,omitempty"`
}

// SkillRunRequest is the body of POST /v1/skills/{name}/runs.
type SkillRunRequest struct {
	// Revision is the revision to run (0: the latest).
	Revision int64 `json:"revision,omitempty"`
	// Script is the path of one of the revision's files, relative to the
	// skill's root (e.g. scripts/fill.py).
	Script string   `json:"script"`
	Args   []string `json:"args,omitempty"`
	Stdin  string   `json:"stdin,omitempty"`
	// StdinBase64 is stdin as base64, for bytes that are not text
	// (exclusive with Stdin).
	StdinBase64 string           `json:"stdin_base64,omitempty"`
	Files       []SkillInputFile `json:"files,omitempty"`
	TimeoutMS   int64            `json:"timeout_ms,omitempty"`
}

// SkillRunDecision is where a run runs, with the inputs and the rule.
type SkillRunDecision struct {
	Source         string `json:"source"`
	SourceRisk     string `json:"source_risk"`
	PermissionRisk string `json:"permission_risk"`
	Risk           string `json:"risk"`
	Ceiling        string `json:"ceiling"`
	// CeilingFrom is operator, or tenant when the tenant's
	// max_tool_risk_level is the lower.
	CeilingFrom string `json:"ceiling_from,omitempty"`
	Runtime     string `json:"runtime"`
	// Network is none or allowlist (with Hosts).
	Network string   `json:"network"`
	Hosts   []string `json:"hosts,omitempty"`
	Rule    string   `json:"rule"`
}

// SkillRun is a finished run of a skill's script. A script that exits
// non-zero is a run with state failed, not an error.
type SkillRun struct {
	Skill     string           `json:"skill"`
	Revision  int64            `json:"revision"`
	Digest    string           `json:"digest"`
	Script    string           `json:"script"`
	Command   []string         `json:"command"`
	SandboxID string           `json:"sandbox_id"`
	JobID     string           `json:"job_id"`
	Profile   string           `json:"profile"`
	Decision  SkillRunDecision `json:"decision"`
	// State is the job's final state (succeeded, failed, timeout, …).
	State           string `json:"state"`
	ExitCode        *int   `json:"exit_code,omitempty"`
	ExitReason      string `json:"exit_reason,omitempty"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	DurationMS      int64  `json:"duration_ms"`
	// Artifacts are the files the script wrote below /workspace/out.
	Artifacts  []Artifact `json:"artifacts"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt time.Time  `json:"finished_at"`
}
