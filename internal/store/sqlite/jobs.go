package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

const jobColumns = `id, tenant, sandbox_id, command, script, cwd, state, exit_code, exit_reason, signal, error,
	stdout_bytes, stderr_bytes, stdout_truncated, stderr_truncated, timeout_ms, created_at, started_at, finished_at, mode`

// jobRow is a job in its stored form.
type jobRow struct {
	id, tenant, sandboxID            string
	command                          sql.NullString
	script, cwd, state               string
	exitCode                         sql.NullInt64
	exitReason, signal, errText      string
	stdoutBytes, stderrBytes         int64
	stdoutTruncated, stderrTruncated bool
	timeoutMS                        int64
	createdAt                        string
	startedAt, finishedAt            sql.NullString
	mode                             string
}

func encodeJob(j *sandbox.Job) (*jobRow, error) {
	r := &jobRow{
		id: j.ID, tenant: j.Tenant, sandboxID: j.SandboxID, script: j.Script, cwd: j.Cwd,
		state: string(j.State), exitReason: string(j.ExitReason), signal: j.Signal, errText: j.Error,
		stdoutBytes: j.StdoutBytes, stderrBytes: j.StderrBytes,
		stdoutTruncated: j.StdoutTruncated, stderrTruncated: j.StderrTruncated, timeoutMS: j.TimeoutMS,
		mode: string(j.Mode),
	}
	if r.mode == "" {
		r.mode = string(sandbox.JobModeSync)
	}
	if j.ExitCode != nil {
		r.exitCode = sql.NullInt64{Int64: int64(*j.ExitCode), Valid: true}
	}
	var err error
	if r.command, err = encodeJSON("command", j.Command, len(j.Command) == 0); err != nil {
		return nil, err
	}
	if r.createdAt, err = encodeTime("created_at", j.CreatedAt); err != nil {
		return nil, err
	}
	if r.startedAt, err = encodeOptTime("started_at", j.StartedAt); err != nil {
		return nil, err
	}
	if r.finishedAt, err = encodeOptTime("finished_at", j.FinishedAt); err != nil {
		return nil, err
	}
	return r, nil
}

func scanJob(s scanner) (*sandbox.Job, error) {
	var r jobRow
	if err := s.Scan(&r.id, &r.tenant, &r.sandboxID, &r.command, &r.script, &r.cwd, &r.state,
		&r.exitCode, &r.exitReason, &r.signal, &r.errText, &r.stdoutBytes, &r.stderrBytes,
		&r.stdoutTruncated, &r.stderrTruncated, &r.timeoutMS, &r.createdAt, &r.startedAt, &r.finishedAt, &r.mode); err != nil {
		return nil, err
	}
	j := &sandbox.Job{
		ID: r.id, Tenant: r.tenant, SandboxID: r.sandboxID, Script: r.script, Cwd: r.cwd,
		State: sandbox.JobState(r.state), ExitReason: sandbox.ExitReason(r.exitReason), Signal: r.signal,
		Error: r.errText, StdoutBytes: r.stdoutBytes, StderrBytes: r.stderrBytes,
		StdoutTruncated: r.stdoutTruncated, StderrTruncated: r.stderrTruncated, TimeoutMS: r.timeoutMS,
		Mode: sandbox.JobMode(r.mode),
	}
	if r.exitCode.Valid {
		code := int(r.exitCode.Int64)
		j.ExitCode = &code
	}
	var err error
	if err = decodeJSON("command", r.command, &j.Command); err != nil {
		return nil, err
	}
	if j.CreatedAt, err = decodeTime("created_at", r.createdAt); err != nil {
		return nil, err
	}
	if j.StartedAt, err = decodeOptTime("started_at", r.startedAt); err != nil {
		return nil, err
	}
	if j.FinishedAt, err = decodeOptTime("finished_at", r.finishedAt); err != nil {
		return nil, err
	}
	return j, nil
}

// CreateJob inserts a job record. A duplicate ID returns
// errdefs.ErrAlreadyExists; a job whose sandbox does not exist returns
// errdefs.ErrNotFound.
func (s *Store) CreateJob(ctx context.Context, j *sandbox.Job) error {
	if j == nil || j.ID == "" {
		return fmt.Errorf("create job: missing id: %w", errdefs.ErrInvalidArgument)
	}
	r, err := encodeJob(j)
	if err != nil {
		return fmt.Errorf("create job %s: %w", j.ID, err)
	}
	_, err = s.writer.ExecContext(ctx, `INSERT INTO jobs (`+jobColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.id, r.tenant, r.sandboxID, r.command, r.script, r.cwd, r.state, r.exitCode, r.exitReason,
		r.signal, r.errText, r.stdoutBytes, r.stderrBytes, r.stdoutTruncated, r.stderrTruncated,
		r.timeoutMS, r.createdAt, r.startedAt, r.finishedAt, r.mode)
	switch {
	case err == nil:
		return nil
	case isUniqueViolation(err):
		return fmt.Errorf("job %s: %w", j.ID, errdefs.ErrAlreadyExists)
	case isForeignKeyViolation(err):
		return fmt.Errorf("job %s: sandbox %s: %w", j.ID, j.SandboxID, errdefs.ErrNotFound)
	}
	return dbError(ctx, "create job "+j.ID, err)
}

// GetJob returns one job; tenant "" matches any tenant, and a job of another
// tenant is reported as not found.
func (s *Store) GetJob(ctx context.Context, tenant, id string) (*sandbox.Job, error) {
	j, err := getJob(ctx, s.reader, id)
	if err != nil {
		return nil, err
	}
	if tenant != "" && j.Tenant != tenant {
		return nil, fmt.Errorf("job %s: %w", id, errdefs.ErrNotFound)
	}
	return j, nil
}

func getJob(ctx context.Context, q queryer, id string) (*sandbox.Job, error) {
	j, err := scanJob(q.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("job %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, dbError(ctx, "get job "+id, err)
	}
	return j, nil
}

// UpdateJob applies fn to the current job record inside one write
// transaction and stores the result. An error from fn aborts the update and
// is returned unchanged. Changes fn makes to ID, Tenant, SandboxID or
// CreatedAt are ignored. fn runs while the store's write connection is held:
// it must be quick and must not call the store.
func (s *Store) UpdateJob(ctx context.Context, id string, fn func(*sandbox.Job) error) (*sandbox.Job, error) {
	get := func(tx queryer) (*sandbox.Job, error) { return getJob(ctx, tx, id) }
	return updateRow(ctx, s, "job "+id, get, func(tx *sql.Tx, cur *sandbox.Job) (*sandbox.Job, error) {
		next := store.CloneJob(cur)
		if err := fn(next); err != nil {
			return nil, err
		}
		next.ID, next.Tenant, next.SandboxID, next.CreatedAt = cur.ID, cur.Tenant, cur.SandboxID, cur.CreatedAt
		next.StartedAt, next.FinishedAt = store.UTCPtr(next.StartedAt), store.UTCPtr(next.FinishedAt)
		if len(next.Command) == 0 {
			next.Command = nil
		}
		r, err := encodeJob(next)
		if err != nil {
			return nil, fmt.Errorf("update job %s: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE jobs SET command = ?, script = ?, cwd = ?, state = ?, exit_code = ?,
			exit_reason = ?, signal = ?, error = ?, stdout_bytes = ?, stderr_bytes = ?, stdout_truncated = ?,
			stderr_truncated = ?, timeout_ms = ?, started_at = ?, finished_at = ?
			WHERE id = ?`,
			r.command, r.script, r.cwd, r.state, r.exitCode, r.exitReason, r.signal, r.errText,
			r.stdoutBytes, r.stderrBytes, r.stdoutTruncated, r.stderrTruncated, r.timeoutMS,
			r.startedAt, r.finishedAt, cur.ID); err != nil {
			return nil, dbError(ctx, "update job "+id, err)
		}
		return next, nil
	})
}

// ListJobs returns the jobs matching f, oldest first (by CreatedAt, then
// insertion order).
func (s *Store) ListJobs(ctx context.Context, f store.JobFilter) ([]*sandbox.Job, error) {
	if err := store.CheckLimit("list jobs", f.Limit); err != nil {
		return nil, err
	}
	var where []string
	var args []any
	if f.Tenant != "" {
		where = append(where, "tenant = ?")
		args = append(args, f.Tenant)
	}
	if f.SandboxID != "" {
		where = append(where, "sandbox_id = ?")
		args = append(args, f.SandboxID)
	}
	if len(f.States) > 0 {
		where = append(where, "state IN ("+placeholders(len(f.States))+")")
		for _, st := range f.States {
			args = append(args, string(st))
		}
	}
	q, args := oldestFirst(`SELECT `+jobColumns+` FROM jobs`, where, args, f.Limit)
	return appendRows(ctx, s.reader, nil, "list jobs", scanJob, q, args...)
}
