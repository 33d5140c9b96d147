package sandbox

import "time"

// Artifact is a regular file a job produced that the service copied into
// its artifact store. The content lives once per SHA256 in the store's
// blobs; the record outlives the sandbox until ExpiresAt.
type Artifact struct {
	ID        string `json:"id"`
	Tenant    string `json:"tenant"`
	JobID     string `json:"job_id"`
	SandboxID string `json:"sandbox_id"`
	// Path is the file's path below the workspace, slash-separated.
	Path      string    `json:"path"`
	Name      string    `json:"name"` // base name of Path
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"` // lowercase hex
	MIME      string    `json:"mime"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// ArtifactSpec is what a job asks to keep: globs relative to the
// workspace ("out/*.png", "report/**") and optional caps that may only
// lower the configured ones (0: the configured cap).
type ArtifactSpec struct {
	Paths         []string `json:"paths"`
	MaxFileBytes  int64    `json:"max_file_bytes,omitempty"`
	MaxTotalBytes int64    `json:"max_total_bytes,omitempty"`
}

// ArtifactCollectionState is where the collection of a job's artifacts is.
type ArtifactCollectionState string

// Collection states: pending until the job ends, then done, or failed when
// the files could not all be looked at (Error says why; what was collected
// before the failure is kept).
const (
	ArtifactsPending ArtifactCollectionState = "pending"
	ArtifactsDone    ArtifactCollectionState = "done"
	ArtifactsFailed  ArtifactCollectionState = "failed"
)

// Reasons a matched file is not kept.
const (
	SkipFileTooLarge  = "file_too_large"  // over the per-file cap
	SkipTotalTooLarge = "total_too_large" // would take the job over its total cap
	SkipTooManyFiles  = "too_many_files"  // over the per-job file count
	SkipUnreadable    = "unreadable"      // vanished or could not be read
)

// SkippedArtifact is a matched file that was not kept, and why.
type SkippedArtifact struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

// ArtifactCollection is the artifact request of one job and its outcome.
type ArtifactCollection struct {
	JobID          string                  `json:"job_id"`
	Tenant         string                  `json:"tenant"`
	SandboxID      string                  `json:"sandbox_id"`
	Spec           ArtifactSpec            `json:"spec"`
	State          ArtifactCollectionState `json:"state"`
	Collected      int                     `json:"collected"`
	CollectedBytes int64                   `json:"collected_bytes"`
	Skipped        []SkippedArtifact       `json:"skipped,omitempty"`
	Error          string                  `json:"error,omitempty"`
	CreatedAt      time.Time               `json:"created_at"`
	FinishedAt     *time.Time              `json:"finished_at,omitempty"`
	ExpiresAt      time.Time               `json:"expires_at"`
}
