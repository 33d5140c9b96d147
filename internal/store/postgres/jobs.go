package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

const jobColumns = `id, tenant, sandbox_id, command, script, cwd, state, exit_code, exit_reason, signal, error,
	stdout_bytes, stderr_bytes, stdout_truncated, stderr_truncated, timeout_ms, created_at, started_at, finished_at, mode`

// jobRow is a job in its stored form.
type jobRow struct {
	id, tenant, sandboxID            string
	command                          []byte
	script, cwd, state               string
	exitCode                         *int32
	exitReason, signal, errText      string
	stdoutBytes, stderrBytes         int64
	stdoutTruncated, stderrTruncated bool
	timeoutMS                        int64
	createdAt                        int64
	startedAt, finishedAt            *int64
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
		code := int32(*j.ExitCode)
		if int(code) != *j.ExitCode {
			return nil, fmt.Errorf("exit code %d does not fit 32 bits: %w", *j.ExitCode, errdefs.ErrInvalidArgument)
		}
		r.exitCode = &code
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

func scanJob(row pgx.Row) (*sandbox.Job, error) {
	var r jobRow
	if err := row.Scan(&r.id, &r.tenant, &r.sandboxID, &r.command, &r.script, &r.cwd, &r.state,
		&r.exitCode, &r.exitReason, &r.signal, &r.errText, &r.stdoutBytes, &r.stderrBytes,
		&r.stdoutTruncated, &r.stderrTruncated, &r.timeoutMS, &r.createdAt, &r.startedAt, &r.finishedAt, &r.mode); err != nil {
		return nil, err
	}
	j := &sandbox.Job{
		ID: r.id, Tenant: r.tenant, SandboxID: r.sandboxID, Script: r.script, Cwd: r.cwd,
		State: sandbox.JobState(r.state), ExitReason: sandbox.ExitReason(r.exitReason), Signal: r.signal,
		Error: r.errText, StdoutBytes: r.stdoutBytes, StderrBytes: r.stderrBytes,
		StdoutTruncated: r.stdoutTruncated, StderrTruncated: r.stderrTruncated, TimeoutMS: r.timeoutMS,
		Mode:      sandbox.JobMode(r.mode),
		CreatedAt: decodeTime(r.createdAt), StartedAt: decodeOptTime(r.startedAt), FinishedAt: decodeOptTime(r.finishedAt),
	}
	if r.exitCode != nil {
		code := int(*r.exitCode)
		j.ExitCode = &code
	}
	if err := decodeJSON("command", r.command, &j.Command); err != nil {
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
	_, err = s.pool.Exec(ctx, `INSERT INTO jobs (`+jobColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)`,
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
	j, err := getJob(ctx, s.pool, id, "")
	if err != nil {
		return nil, err
	}
	if tenant != "" && j.Tenant != tenant {
		return nil, fmt.Errorf("job %s: %w", id, errdefs.ErrNotFound)
	}
	return j, nil
}

// getJob reads one job; lock is "" or a locking clause such as "FOR UPDATE".
func getJob(ctx context.Context, q querier, id, lock string) (*sandbox.Job, error) {
	j, err := scanJob(q.QueryRow(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = $1 `+lock, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("job %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, dbError(ctx, "get job "+id, err)
	}
	return j, nil
}

// UpdateJob applies fn to the current job record and stores the result, in
// one transaction holding the row lock (SELECT … FOR UPDATE), so concurrent
// updates never lose a write. An error from fn aborts the update and is
// returned unchanged. Changes fn makes to ID, Tenant, SandboxID, CreatedAt or
// Mode (fixed when the job is created) are ignored. fn runs while the row
// lock is held: it must be quick and must not call the store.
func (s *Store) UpdateJob(ctx context.Context, id string, fn func(*sandbox.Job) error) (*sandbox.Job, error) {
	var next *sandbox.Job
	err := s.inTx(ctx, "update job "+id, func(tx pgx.Tx) error {
		cur, err := getJob(ctx, tx, id, "FOR UPDATE")
		if err != nil {
			return err
		}
		next = store.CloneJob(cur)
		if err := fn(next); err != nil {
			return err
		}
		next.ID, next.Tenant, next.SandboxID, next.CreatedAt = cur.ID, cur.Tenant, cur.SandboxID, cur.CreatedAt
		next.Mode = cur.Mode
		next.StartedAt, next.FinishedAt = store.UTCPtr(next.StartedAt), store.UTCPtr(next.FinishedAt)
		if len(next.Command) == 0 {
			next.Command = nil
		}
		r, err := encodeJob(next)
		if err != nil {
			return fmt.Errorf("update job %s: %w", id, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE jobs SET command = $1, script = $2, cwd = $3, state = $4, exit_code = $5,
			exit_reason = $6, signal = $7, error = $8, stdout_bytes = $9, stderr_bytes = $10, stdout_truncated = $11,
			stderr_truncated = $12, timeout_ms = $13, started_at = $14, finished_at = $15
			WHERE id = $16`,
			r.command, r.script, r.cwd, r.state, r.exitCode, r.exitReason, r.signal, r.errText,
			r.stdoutBytes, r.stderrBytes, r.stdoutTruncated, r.stderrTruncated, r.timeoutMS,
			r.startedAt, r.finishedAt, cur.ID); err != nil {
			return dbError(ctx, "update job "+id, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return next, nil
}

// ListJobs returns the jobs matching f, oldest first (by CreatedAt, then
// insertion order).
func (s *Store) ListJobs(ctx context.Context, f store.JobFilter) ([]*sandbox.Job, error) {
	if err := store.CheckLimit("list jobs", f.Limit); err != nil {
		return nil, err
	}
	var where []string
	var a args
	if f.Tenant != "" {
		where = append(where, "tenant = "+a.add(f.Tenant))
	}
	if f.SandboxID != "" {
		where = append(where, "sandbox_id = "+a.add(f.SandboxID))
	}
	if len(f.States) > 0 {
		where = append(where, "state = ANY("+a.add(stateStrings(f.States))+")")
	}
	q := oldestFirst(`SELECT `+jobColumns+` FROM jobs`, where, &a, f.Limit)
	rows, err := s.pool.Query(ctx, q, a...)
	return collectRows(ctx, "list jobs", nil, scanJob, rows, err)
}
