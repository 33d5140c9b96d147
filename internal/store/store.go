package store

import (
	"context"
	"time"

	"genesis.dev/sandbox/internal/sandbox"
)

// Store is the persistence contract. All methods are safe for concurrent use.
// Not-found lookups return an error of class errdefs.ErrNotFound; a failed
// optimistic-concurrency check returns errdefs.ErrPreconditionFailed.
type Store interface {
	NetworkStore

	// Ping checks that the store is reachable.
	Ping(ctx context.Context) error
	Close() error

	// CreateSandbox inserts a new record (ResourceVersion is set to 1).
	// A duplicate ID returns errdefs.ErrAlreadyExists.
	CreateSandbox(ctx context.Context, sb *sandbox.Sandbox) error
	// GetSandbox returns one sandbox. tenant "" matches any tenant; otherwise a
	// sandbox of another tenant is reported as not found.
	GetSandbox(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error)
	// ListSandboxes returns the sandboxes matching f, oldest first.
	ListSandboxes(ctx context.Context, f SandboxFilter) ([]*sandbox.Sandbox, error)
	// UpdateSandbox applies fn to the current record and stores the result,
	// bumping ResourceVersion and UpdatedAt (to now); the fields NextSandbox
	// keeps cannot change. If ifVersion is non-zero and differs from the
	// stored version it returns ErrPreconditionFailed without calling fn. An
	// error from fn aborts the update and is returned.
	UpdateSandbox(ctx context.Context, id string, ifVersion int64, now time.Time, fn func(*sandbox.Sandbox) error) (*sandbox.Sandbox, error)
	// CountSandboxesByState returns how many sandboxes (of every tenant) are
	// in each state; a state without sandboxes is absent from the map.
	CountSandboxesByState(ctx context.Context) (map[sandbox.State]int, error)

	// CreateJob inserts a job record before the job runs.
	CreateJob(ctx context.Context, j *sandbox.Job) error
	// GetJob returns one job; tenant "" matches any tenant.
	GetJob(ctx context.Context, tenant, id string) (*sandbox.Job, error)
	// UpdateJob applies fn to the current job record and stores the result;
	// the fields NextJob keeps (among them Mode) cannot change.
	UpdateJob(ctx context.Context, id string, fn func(*sandbox.Job) error) (*sandbox.Job, error)
	// FinishJob stores the end of job j.ID — j's State, ExitCode,
	// ExitReason, Signal, Error, output byte counts, truncation flags and
	// FinishedAt — in one write whatever the record held (a synchronous
	// exec's end, which only its own caller records), and returns the
	// record as stored; its other fields stay as recorded. A job not
	// recorded is ErrNotFound.
	FinishJob(ctx context.Context, j *sandbox.Job) (*sandbox.Job, error)
	// ListJobs returns jobs matching f, oldest first.
	ListJobs(ctx context.Context, f JobFilter) ([]*sandbox.Job, error)

	// CreateSession inserts a session of an existing sandbox.
	CreateSession(ctx context.Context, se *sandbox.Session) error
	// GetSession returns one session; tenant "" matches any tenant.
	GetSession(ctx context.Context, tenant, id string) (*sandbox.Session, error)
	// UpdateSession applies fn to the current session record and stores it;
	// the fields NextSession keeps cannot change.
	UpdateSession(ctx context.Context, id string, fn func(*sandbox.Session) error) (*sandbox.Session, error)

	Tenants
	Audit
	Artifacts
	LeaseStore
	LeaseEnder
	SandboxSessions
	PoolReturn
	Skills
	MCPCatalog
	Snapshots
	Volumes
}

// SandboxFilter selects sandboxes. Zero fields match everything.
type SandboxFilter struct {
	Tenant   string
	States   []sandbox.State
	Profile  string
	Metadata map[string]string // all pairs must match
	// Instance, if set, keeps sandboxes made by that service instance.
	Instance string
	// ExcludeFinal drops destroyed sandboxes.
	ExcludeFinal bool
	Limit        int
}

// JobFilter selects jobs. Zero fields match everything.
type JobFilter struct {
	Tenant    string
	SandboxID string
	States    []sandbox.JobState
	Limit     int
}

// Locker is implemented by stores that several service instances share:
// named locks that a process holds for as long as it lives (PostgreSQL
// session advisory locks). A store of one process (SQLite) answers
// errdefs.ErrNotImplemented.
type Locker interface {
	// TryLock takes the lock name for this process if nobody holds it.
	// ok is false when another process holds it.
	TryLock(ctx context.Context, name string) (l Lock, ok bool, err error)
	// Lock waits until nobody holds the lock name and takes it, for a
	// short section that one process at a time runs.
	Lock(ctx context.Context, name string) (Lock, error)
}

// Adopter is implemented by stores that several service instances share.
type Adopter interface {
	// AdoptSandboxes makes instance to the owner of every sandbox of
	// instance from that is not destroyed (the from instance is
	// gone: its lock was free) and returns how many moved.
	AdoptSandboxes(ctx context.Context, from, to string, now time.Time) (int, error)
	// LiveInstances lists the instances that own a sandbox that is not
	// destroyed or failed.
	LiveInstances(ctx context.Context) ([]string, error)
	// TakeSandbox makes instance to the owner of sandbox id if instance
	// from owns it; errdefs.ErrPreconditionFailed if not (any more).
	TakeSandbox(ctx context.Context, id, from, to string, now time.Time) error
}

// Lock is a held Locker lock.
type Lock interface {
	// Lost is closed when the lock is gone without Release: the
	// connection that held it broke, so another process may hold it now.
	Lost() <-chan struct{}
	// Release gives the lock up.
	Release()
}
