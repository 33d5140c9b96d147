package api

import "time"

// ArtifactRequest names files a job keeps when it ends: globs relative to
// /workspace ("out/*.png", "report/**"), with optional caps that may only
// lower the service's.
type ArtifactRequest struct {
	Paths         []string `json:"paths"`
	MaxFileBytes  int64    `json:"max_file_bytes,omitempty"`
	MaxTotalBytes int64    `json:"max_total_bytes,omitempty"`
}

// ArtifactSummary is the outcome of a job's artifact request, on the job.
type ArtifactSummary struct {
	// State is pending (the job runs), done, or failed (Error says why;
	// what was collected before is kept).
	State          string `json:"state"`
	Collected      int    `json:"collected"`
	CollectedBytes int64  `json:"collected_bytes"`
	Skipped        int    `json:"skipped"`
	Error          string `json:"error,omitempty"`
}

// Artifact is a kept file of a job.
type Artifact struct {
	ID        string    `json:"id"`
	JobID     string    `json:"job_id"`
	SandboxID string    `json:"sandbox_id"`
	Path      string    `json:"path"` // below /workspace
	Name      string    `json:"name"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"`
	MIME      string    `json:"mime"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// SkippedArtifact is a matched file that was not kept, and why
// (file_too_large, total_too_large, too_many_files, unreadable).
type SkippedArtifact struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

// ArtifactList is the answer of GET /v1/jobs/{id}/artifacts. A job that
// asked for no artifacts has state "none" and no items.
type ArtifactList struct {
	JobID     string            `json:"job_id"`
	State     string            `json:"state"`
	Requested []string          `json:"requested"`
	Items     []Artifact        `json:"items"`
	Skipped   []SkippedArtifact `json:"skipped"`
	Error     string            `json:"error,omitempty"`
}
