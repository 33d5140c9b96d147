package sandbox

import "time"

// SnapshotState is the state of a snapshot record.
type SnapshotState string

// Snapshot states. A snapshot is creating from its first side effect
// until its files and manifest are complete; only a ready snapshot is
// listed to its tenant as usable. A failed one says why and holds no
// files; deleting marks one whose files are being removed.
const (
	SnapshotCreating SnapshotState = "creating"
	SnapshotReady    SnapshotState = "ready"
	SnapshotFailed   SnapshotState = "failed"
	SnapshotDeleting SnapshotState = "deleting"
)

// Snapshot is the persistent record of one saved state of a sandbox:
// its files (workspace and root filesystem changes) and, where the
// runtime keeps them, its processes and memory.
type Snapshot struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	Name   string `json:"name,omitempty"`
	// SandboxID is the sandbox it was taken of; Parent the snapshot that
	// sandbox was made from, if any.
	SandboxID string        `json:"sandbox_id"`
	Parent    string        `json:"parent,omitempty"`
	State     SnapshotState `json:"state"`
	// What a new sandbox from it gets: the profile, runtime, image, risk
	// level and resources of the sandbox it was taken of.
	Profile   string    `json:"profile"`
	Runtime   Runtime   `json:"runtime"`
	Image     string    `json:"image"`
	RiskLevel RiskLevel `json:"risk_level"`
	Resources Resources `json:"resources"`
	// Memory says it holds processes and memory (runsc); Files are always
	// held.
	Memory bool `json:"memory"`
	// Internal snapshots are the service's own (a fork's, a hibernation's),
	// not listed to the tenant and removed with their use.
	Internal bool `json:"internal,omitempty"`
	// Sessions are the shell sessions and code contexts the sandbox had
	// when it was taken: a sandbox made from it gets copies of them.
	Sessions []Session `json:"sessions,omitempty"`
	// SizeBytes is what its files take on disk.
	SizeBytes int64      `json:"size_bytes"`
	Error     string     `json:"error,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// Expired reports whether the snapshot's retention has passed at now.
func (s *Snapshot) Expired(now time.Time) bool {
	return s.ExpiresAt != nil && !now.Before(*s.ExpiresAt)
}
