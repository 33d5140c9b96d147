package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

const jobColumns = `id, tenant, sandbox_id, command, script, cwd, state, exit_code, exit_reason, signal, error,
	stdout_bytes, stderr_bytes, stdout_truncated, stderr_truncated, timeout_ms, created_at, started_at, finished_at, mode`

// jobRow is a job in its stored form.
type jobRow struct {
	command                          sql.NullString
	exitCode                         sql.NullInt64
	createdAt, startedAt, finishedAt any
	mode                             string
}

func (s *Store) encodeJob(j *sandbox.Job) (*jobRow, error) {
	r := &jobRow{mode: string(j.Mode)}
	if r.mode == "" {
		r.mode = string(sandbox.JobModeSync)
	}
	if j.ExitCode != nil {
		// The column is a 32-bit INTEGER on PostgreSQL.
		if *j.ExitCode < math.MinInt32 || *j.ExitCode > math.MaxInt32 {
			return nil, errdefs.Invalid("exit code %d does not fit 32 bits", *j.ExitCode)
		}
		r.exitCode = sql.NullInt64{Int64: int64(*j.ExitCode), Valid: true}
	}
	var err error
	if r.command, err = encodeJSON("command", j.Command, len(j.Command) == 0); err != nil {
		return nil, err
	}
	if r.createdAt, err = s.encodeTime("created_at", j.CreatedAt); err != nil {
		return nil, err
	}
	if r.startedAt, err = s.encodeOptTime("started_at", j.StartedAt); err != nil {
		return nil, err
	}
	if r.finishedAt, err = s.encodeOptTime("finished_at", j.FinishedAt); err != nil {
		return nil, err
	}
	return r, nil
}

func scanJob(row scanner) (*sandbox.Job, error) {
	var (
		j                          sandbox.Job
		command                    sql.NullString
		state, exitReason, mode    string
		exitCode                   sql.NullInt64
		created, started, finished dbTime
	)
	if err := row.Scan(&j.ID, &j.Tenant, &j.SandboxID, &command, &j.Script, &j.Cwd, &state,
		&exitCode, &exitReason, &j.Signal, &j.Error, &j.StdoutBytes, &j.StderrBytes,
		&j.StdoutTruncated, &j.StderrTruncated, &j.TimeoutMS, &created, &started, &finished, &mode); err != nil {
		return nil, err
	}
	j.State, j.ExitReason, j.Mode = sandbox.JobState(state), sandbox.ExitReason(exitReason), sandbox.JobMode(mode)
	j.CreatedAt, j.StartedAt, j.FinishedAt = created.t, started.ptr(), finished.ptr()
	if exitCode.Valid {
		code := int(exitCode.Int64)
		j.ExitCode = &code
	}
	if err := decodeJSON("command", command, &j.Command); err != nil {
		return nil, err
	}
	return &j, nil
}

// CreateJob inserts a job record. A duplicate ID returns
// errdefs.ErrAlreadyExists; a job whose sandbox does not exist returns
// errdefs.ErrNotFound.
func (s *Store) CreateJob(ctx context.Context, j *sandbox.Job) error {
	if j == nil || j.ID == "" {
		return errdefs.Invalid("create job: missing id")
	}
	r, err := s.encodeJob(j)
	if err != nil {
		return fmt.Errorf("create job %s: %w", j.ID, err)
	}
	_, err = s.hot(s.writer).ExecContext(ctx, s.q(`INSERT INTO jobs (`+jobColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		j.ID, j.Tenant, j.SandboxID, r.command, j.Script, j.Cwd, string(j.State), r.exitCode, string(j.ExitReason),
		j.Signal, j.Error, j.StdoutBytes, j.StderrBytes, j.StdoutTruncated, j.StderrTruncated,
		j.TimeoutMS, r.createdAt, r.startedAt, r.finishedAt, r.mode)
	switch {
	case err == nil:
		return nil
	case s.isUniqueViolation(err):
		return fmt.Errorf("job %s: %w", j.ID, errdefs.ErrAlreadyExists)
	case s.isForeignKeyViolation(err):
		return fmt.Errorf("job %s: sandbox %s: %w", j.ID, j.SandboxID, errdefs.ErrNotFound)
	}
	return s.dbError(ctx, "create job "+j.ID, err)
}

// GetJob returns one job; tenant "" matches any tenant, and a job of another
// tenant is reported as not found.
func (s *Store) GetJob(ctx context.Context, tenant, id string) (*sandbox.Job, error) {
	j, err := s.getJob(ctx, s.reader, id, "")
	if err != nil {
		return nil, err
	}
	if tenant != "" && j.Tenant != tenant {
		return nil, fmt.Errorf("job %s: %w", id, errdefs.ErrNotFound)
	}
	return j, nil
}

// getJob reads one job; lock is "" or the dialect's row lock.
func (s *Store) getJob(ctx context.Context, q queryer, id, lock string) (*sandbox.Job, error) {
	return getRow(ctx, s, q, "job", id, scanJob, `SELECT `+jobColumns+` FROM jobs WHERE id = ? `+lock)
}

// UpdateJob applies fn to the current job record and stores the result as
// store.NextJob makes it, in one write transaction holding the row, so
// concurrent updates never lose a write. An error from fn aborts the update
// and is returned unchanged. fn runs while the row is held: it must be
// quick and must not call the store.
func (s *Store) UpdateJob(ctx context.Context, id string, fn func(*sandbox.Job) error) (*sandbox.Job, error) {
	get := func(tx *sql.Tx) (*sandbox.Job, error) { return s.getJob(ctx, tx, id, s.d.RowLock()) }
	return update(ctx, s, "job "+id, get, func(tx *sql.Tx, cur *sandbox.Job) (*sandbox.Job, error) {
		next := store.CloneJob(cur)
		if err := fn(next); err != nil {
			return nil, err
		}
		store.NextJob(cur, next)
		r, err := s.encodeJob(next)
		if err != nil {
			return nil, fmt.Errorf("update job %s: %w", id, err)
		}
		if _, err := s.hot(tx).ExecContext(ctx, s.q(`UPDATE jobs SET command = ?, script = ?, cwd = ?, state = ?, exit_code = ?,
			exit_reason = ?, signal = ?, error = ?, stdout_bytes = ?, stderr_bytes = ?, stdout_truncated = ?,
			stderr_truncated = ?, timeout_ms = ?, started_at = ?, finished_at = ?
			WHERE id = ?`),
			r.command, next.Script, next.Cwd, string(next.State), r.exitCode, string(next.ExitReason), next.Signal, next.Error,
			next.StdoutBytes, next.StderrBytes, next.StdoutTruncated, next.StderrTruncated, next.TimeoutMS,
			r.startedAt, r.finishedAt, cur.ID); err != nil {
			return nil, s.dbError(ctx, "update job "+id, err)
		}
		return next, nil
	})
}

// FinishJob stores a job's end in one UPDATE that returns the stored
// record: no transaction around a read and a write, as UpdateJob needs.
func (s *Store) FinishJob(ctx context.Context, j *sandbox.Job) (*sandbox.Job, error) {
	if j == nil || j.ID == "" {
		return nil, errdefs.Invalid("finish job: missing id")
	}
	r, err := s.encodeJob(j)
	if err != nil {
		return nil, fmt.Errorf("finish job %s: %w", j.ID, err)
	}
	got, err := scanJob(s.hot(s.writer).QueryRowContext(ctx, s.q(`UPDATE jobs SET state = ?, exit_code = ?, exit_reason = ?,
		signal = ?, error = ?, stdout_bytes = ?, stderr_bytes = ?, stdout_truncated = ?, stderr_truncated = ?, finished_at = ?
		WHERE id = ? RETURNING `+jobColumns),
		string(j.State), r.exitCode, string(j.ExitReason), j.Signal, j.Error, j.StdoutBytes, j.StderrBytes,
		j.StdoutTruncated, j.StderrTruncated, r.finishedAt, j.ID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("job %s: %w", j.ID, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, s.dbError(ctx, "finish job "+j.ID, err)
	}
	return got, nil
}

// ListJobs returns the jobs matching f, oldest first (by CreatedAt, then
// insertion order).
func (s *Store) ListJobs(ctx context.Context, f store.JobFilter) ([]*sandbox.Job, error) {
	if err := store.CheckLimit("list jobs", f.Limit); err != nil {
		return nil, err
	}
	var c conds
	c.eq("tenant", f.Tenant)
	c.eq("sandbox_id", f.SandboxID)
	in(&c, "state", "IN", f.States)
	q, args := s.oldestFirst(`SELECT `+jobColumns+` FROM jobs`, &c, f.Limit)
	return appendRows(ctx, s, s.reader, nil, "list jobs", scanJob, q, args...)
}
