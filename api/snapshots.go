package api

import "time"

// Snapshot is a saved state of a sandbox (docs/snapshots.md).
type Snapshot struct {
	ID        string `json:"id"`
	Name      string `json:"name,omitempty"`
	SandboxID string `json:"sandbox_id"`
	// Parent is the snapshot the sandbox it was taken of was made from.
	Parent string `json:"parent,omitempty"`
	// State: creating, ready or failed (Error says why).
	State     string    `json:"state"`
	Profile   string    `json:"profile"`
	Runtime   string    `json:"runtime"`
	RiskLevel string    `json:"risk_level"`
	Resources Resources `json:"resources"`
	// Memory says it holds processes and memory (runsc); files are always
	// held.
	Memory    bool       `json:"memory"`
	SizeBytes int64      `json:"size_bytes"`
	Error     string     `json:"error,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// SnapshotList is a page of snapshots, newest first.
type SnapshotList struct {
	Items []Snapshot `json:"items"`
}

// CreateSnapshotRequest asks for a snapshot of a sandbox.
type CreateSnapshotRequest struct {
	Name string `json:"name,omitempty"`
	// Memory asks for processes and memory too (runsc); nil takes them
	// where the runtime keeps them, false takes files only.
	Memory *bool `json:"memory,omitempty"`
}

// ForkRequest asks for copies of a sandbox.
type ForkRequest struct {
	Count      int               `json:"count"`
	TTLSeconds int64             `json:"ttl_seconds,omitempty"`
	Metadata   map[string]string `json:"metadata,omitempty"`
}

// ForkResult is the answer of a fork: the copies made, and the error of
// each copy that could not be made.
type ForkResult struct {
	Sandboxes []Sandbox   `json:"sandboxes"`
	Errors    []ForkError `json:"errors,omitempty"`
}

// ForkError is a copy of a fork that failed.
type ForkError struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// RollbackRequest asks to return a sandbox to a snapshot.
type RollbackRequest struct {
	SnapshotID string `json:"snapshot_id"`
}
