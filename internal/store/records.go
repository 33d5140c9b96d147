package store

import (
	"maps"
	"slices"
	"time"

	"genesis.dev/sandbox/internal/sandbox"
)

// UTCPtr returns a copy of *t in UTC, or nil.
func UTCPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// CloneJob returns a deep copy of j.
func CloneJob(j *sandbox.Job) *sandbox.Job {
	c := *j
	c.Command = slices.Clone(j.Command)
	if j.ExitCode != nil {
		code := *j.ExitCode
		c.ExitCode = &code
	}
	if j.StartedAt != nil {
		t := *j.StartedAt
		c.StartedAt = &t
	}
	if j.FinishedAt != nil {
		t := *j.FinishedAt
		c.FinishedAt = &t
	}
	return &c
}

// CloneSandbox returns a deep copy of sb.
func CloneSandbox(sb *sandbox.Sandbox) *sandbox.Sandbox {
	c := *sb
	c.Env = maps.Clone(sb.Env)
	c.Metadata = maps.Clone(sb.Metadata)
	if sb.ExpiresAt != nil {
		t := *sb.ExpiresAt
		c.ExpiresAt = &t
	}
	if sb.Suspension != nil {
		su := *sb.Suspension
		c.Suspension = &su
	}
	return &c
}

// NormalizeSandbox puts sb in the form a read returns: times in UTC, empty
// maps as nil.
func NormalizeSandbox(sb *sandbox.Sandbox) {
	sb.CreatedAt, sb.UpdatedAt = sb.CreatedAt.UTC(), sb.UpdatedAt.UTC()
	sb.ExpiresAt = UTCPtr(sb.ExpiresAt)
	if sb.Suspension != nil {
		sb.Suspension.Since = sb.Suspension.Since.UTC()
	}
	if len(sb.Env) == 0 {
		sb.Env = nil
	}
	if len(sb.Metadata) == 0 {
		sb.Metadata = nil
	}
}
