package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

const sandboxColumns = `id, tenant, profile, runtime, risk_level, state, image, resources, env, metadata,
	container_id, failure_reason, resource_version, created_at, updated_at, expires_at, instance, reserved, suspension, pool`

// sandboxRow is a sandbox in its stored form.
type sandboxRow struct {
	id, tenant, profile, runtime, riskLevel, state, image string
	resources, env, metadata, suspension                  sql.NullString
	containerID, failureReason                            string
	resourceVersion                                       int64
	createdAt, updatedAt, expiresAt                       any
	instance, reserved, pool                              string
}

func (s *Store) encodeSandbox(sb *sandbox.Sandbox) (*sandboxRow, error) {
	r := &sandboxRow{
		id: sb.ID, tenant: sb.Tenant, profile: sb.Profile, runtime: string(sb.Runtime),
		riskLevel: string(sb.RiskLevel), state: string(sb.State), image: sb.Image,
		containerID: sb.ContainerID, failureReason: sb.FailureReason, resourceVersion: sb.ResourceVersion,
		instance: sb.Instance, reserved: sb.Reserved, pool: sb.Pool,
	}
	var err error
	if r.resources, err = encodeJSON("resources", sb.Resources, false); err != nil {
		return nil, err
	}
	if r.env, err = encodeJSON("env", sb.Env, len(sb.Env) == 0); err != nil {
		return nil, err
	}
	if r.metadata, err = encodeJSON("metadata", sb.Metadata, len(sb.Metadata) == 0); err != nil {
		return nil, err
	}
	if r.suspension, err = encodeJSON("suspension", sb.Suspension, sb.Suspension == nil); err != nil {
		return nil, err
	}
	if r.createdAt, err = s.encodeTime("created_at", sb.CreatedAt); err != nil {
		return nil, err
	}
	if r.updatedAt, err = s.encodeTime("updated_at", sb.UpdatedAt); err != nil {
		return nil, err
	}
	if r.expiresAt, err = s.encodeOptTime("expires_at", sb.ExpiresAt); err != nil {
		return nil, err
	}
	return r, nil
}

func scanSandbox(row scanner) (*sandbox.Sandbox, error) {
	var (
		sb                        sandbox.Sandbox
		runtime, risk, state      string
		resources, env, metadata  sql.NullString
		suspension                sql.NullString
		created, updated, expires dbTime
	)
	if err := row.Scan(&sb.ID, &sb.Tenant, &sb.Profile, &runtime, &risk, &state, &sb.Image,
		&resources, &env, &metadata, &sb.ContainerID, &sb.FailureReason, &sb.ResourceVersion,
		&created, &updated, &expires, &sb.Instance, &sb.Reserved, &suspension, &sb.Pool); err != nil {
		return nil, err
	}
	sb.Runtime, sb.RiskLevel, sb.State = sandbox.Runtime(runtime), sandbox.RiskLevel(risk), sandbox.State(state)
	sb.CreatedAt, sb.UpdatedAt, sb.ExpiresAt = created.t, updated.t, expires.ptr()
	if err := decodeJSON("resources", resources, &sb.Resources); err != nil {
		return nil, err
	}
	if err := decodeJSON("env", env, &sb.Env); err != nil {
		return nil, err
	}
	if err := decodeJSON("metadata", metadata, &sb.Metadata); err != nil {
		return nil, err
	}
	if err := decodeJSON("suspension", suspension, &sb.Suspension); err != nil {
		return nil, err
	}
	if sb.Suspension != nil {
		sb.Suspension.Since = sb.Suspension.Since.UTC()
	}
	return &sb, nil
}

// CreateSandbox inserts sb with ResourceVersion 1 and sets sb.ResourceVersion
// to 1. A duplicate ID returns errdefs.ErrAlreadyExists.
func (s *Store) CreateSandbox(ctx context.Context, sb *sandbox.Sandbox) error {
	if sb == nil || sb.ID == "" {
		return errdefs.Invalid("create sandbox: missing id")
	}
	r, err := s.encodeSandbox(sb)
	if err != nil {
		return fmt.Errorf("create sandbox %s: %w", sb.ID, err)
	}
	r.resourceVersion = 1
	_, err = s.writer.ExecContext(ctx, s.q(`INSERT INTO sandboxes (`+sandboxColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		r.id, r.tenant, r.profile, r.runtime, r.riskLevel, r.state, r.image, r.resources, r.env, r.metadata,
		r.containerID, r.failureReason, r.resourceVersion, r.createdAt, r.updatedAt, r.expiresAt, r.instance, r.reserved, r.suspension, r.pool)
	if err != nil {
		if s.isUniqueViolation(err) {
			return fmt.Errorf("sandbox %s: %w", sb.ID, errdefs.ErrAlreadyExists)
		}
		return s.dbError(ctx, "create sandbox "+sb.ID, err)
	}
	sb.ResourceVersion = 1
	return nil
}

// GetSandbox returns one sandbox. tenant "" matches any tenant; a sandbox of
// another tenant is reported as not found.
func (s *Store) GetSandbox(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error) {
	sb, err := s.getSandbox(ctx, s.reader, id, "")
	if err != nil {
		return nil, err
	}
	if tenant != "" && sb.Tenant != tenant {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return sb, nil
}

// getSandbox reads one sandbox; lock is "" or the dialect's row lock.
func (s *Store) getSandbox(ctx context.Context, q queryer, id, lock string) (*sandbox.Sandbox, error) {
	return getRow(ctx, s, q, "sandbox", id, scanSandbox, `SELECT `+sandboxColumns+` FROM sandboxes WHERE id = ? `+lock)
}

// ListSandboxes returns the sandboxes matching f, oldest first (by CreatedAt,
// then insertion order).
func (s *Store) ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]*sandbox.Sandbox, error) {
	if err := store.CheckLimit("list sandboxes", f.Limit); err != nil {
		return nil, err
	}
	var c conds
	c.eq("tenant", f.Tenant)
	in(&c, "state", "IN", f.States)
	c.eq("profile", f.Profile)
	c.eq("instance", f.Instance)
	if f.ExcludeFinal {
		var final []sandbox.State
		for _, st := range sandbox.AllStates {
			if st.Final() {
				final = append(final, st)
			}
		}
		in(&c, "state", "NOT IN", final)
	}
	if len(f.Metadata) > 0 {
		cond, args, err := s.d.MetadataContains("metadata", f.Metadata)
		if err != nil {
			return nil, fmt.Errorf("list sandboxes: %w", err)
		}
		c.add(cond, args...)
	}
	q, args := s.oldestFirst(`SELECT `+sandboxColumns+` FROM sandboxes`, &c, f.Limit)
	return appendRows(ctx, s, s.reader, nil, "list sandboxes", scanSandbox, q, args...)
}

// CountSandboxesByState returns how many sandboxes are in each state, in
// one query; states without sandboxes are absent.
func (s *Store) CountSandboxesByState(ctx context.Context) (map[sandbox.State]int, error) {
	type count struct {
		state sandbox.State
		n     int
	}
	rows, err := appendRows(ctx, s, s.reader, nil, "count sandboxes", func(r scanner) (count, error) {
		var c count
		var state string
		err := r.Scan(&state, &c.n)
		c.state = sandbox.State(state)
		return c, err
	}, `SELECT state, COUNT(*) FROM sandboxes GROUP BY state`)
	if err != nil {
		return nil, err
	}
	out := make(map[sandbox.State]int, len(rows))
	for _, c := range rows {
		out[c.state] = c.n
	}
	return out, nil
}

// UpdateSandbox applies fn to the current record and stores the result as
// store.NextSandbox makes it. The row is read with the dialect's row lock in
// one write transaction, so concurrent updates of a sandbox, from this
// process or another one, run one after the other and never lose a write.
// If ifVersion is non-zero and differs from the stored version it returns
// errdefs.ErrPreconditionFailed without calling fn. An error from fn aborts
// the update and is returned unchanged. fn runs while the row lock is held:
// it must be quick and must not call the store.
func (s *Store) UpdateSandbox(ctx context.Context, id string, ifVersion int64, now time.Time, fn func(*sandbox.Sandbox) error) (*sandbox.Sandbox, error) {
	get := func(tx *sql.Tx) (*sandbox.Sandbox, error) { return s.getSandbox(ctx, tx, id, s.d.RowLock()) }
	return update(ctx, s, "sandbox "+id, get, func(tx *sql.Tx, cur *sandbox.Sandbox) (*sandbox.Sandbox, error) {
		if err := store.CheckVersion("sandbox "+id, cur.ResourceVersion, ifVersion); err != nil {
			return nil, err
		}
		next := store.CloneSandbox(cur) // fn may change next freely; cur stays as stored
		if err := fn(next); err != nil {
			return nil, err
		}
		store.NextSandbox(cur, next, now)
		r, err := s.encodeSandbox(next)
		if err != nil {
			return nil, fmt.Errorf("update sandbox %s: %w", id, err)
		}
		res, err := tx.ExecContext(ctx, s.q(`UPDATE sandboxes SET profile = ?, runtime = ?, risk_level = ?, state = ?,
			image = ?, resources = ?, env = ?, metadata = ?, container_id = ?, failure_reason = ?,
			resource_version = ?, updated_at = ?, expires_at = ?, suspension = ?
			WHERE id = ? AND resource_version = ?`),
			r.profile, r.runtime, r.riskLevel, r.state, r.image, r.resources, r.env, r.metadata,
			r.containerID, r.failureReason, r.resourceVersion, r.updatedAt, r.expiresAt, r.suspension,
			cur.ID, cur.ResourceVersion)
		if err != nil {
			return nil, s.dbError(ctx, "update sandbox "+id, err)
		}
		if err := oneRow(res, "update sandbox "+id); err != nil {
			return nil, err
		}
		return next, nil
	})
}

// oneRow checks that a conditional write changed exactly one row; anything
// else is unreachable while the transaction holds the row (or the single
// writer), and reported as a conflict.
func oneRow(res sql.Result, op string) error {
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("%s: record changed during the update (%d rows, %v): %w", op, n, err, errdefs.ErrConflict)
	}
	return nil
}
