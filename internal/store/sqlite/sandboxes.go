package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

const sandboxColumns = `id, tenant, profile, runtime, risk_level, state, image, resources, env, metadata,
	container_id, failure_reason, resource_version, created_at, updated_at, expires_at, instance`

// queryer is what sandbox and job reads need from a pool or a transaction.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// sandboxRow is a sandbox in its stored form.
type sandboxRow struct {
	id, tenant, profile, runtime, riskLevel, state, image string
	resources                                             string
	env, metadata                                         sql.NullString
	containerID, failureReason                            string
	resourceVersion                                       int64
	createdAt, updatedAt                                  string
	expiresAt                                             sql.NullString
	instance                                              string
}

func encodeSandbox(sb *sandbox.Sandbox) (*sandboxRow, error) {
	r := &sandboxRow{
		id: sb.ID, tenant: sb.Tenant, profile: sb.Profile, runtime: string(sb.Runtime),
		riskLevel: string(sb.RiskLevel), state: string(sb.State), image: sb.Image,
		containerID: sb.ContainerID, failureReason: sb.FailureReason, resourceVersion: sb.ResourceVersion,
		instance: sb.Instance,
	}
	res, err := encodeJSON("resources", sb.Resources, false)
	if err != nil {
		return nil, err
	}
	r.resources = res.String
	if r.env, err = encodeJSON("env", sb.Env, len(sb.Env) == 0); err != nil {
		return nil, err
	}
	if r.metadata, err = encodeJSON("metadata", sb.Metadata, len(sb.Metadata) == 0); err != nil {
		return nil, err
	}
	if r.createdAt, err = encodeTime("created_at", sb.CreatedAt); err != nil {
		return nil, err
	}
	if r.updatedAt, err = encodeTime("updated_at", sb.UpdatedAt); err != nil {
		return nil, err
	}
	if r.expiresAt, err = encodeOptTime("expires_at", sb.ExpiresAt); err != nil {
		return nil, err
	}
	return r, nil
}

func scanSandbox(s scanner) (*sandbox.Sandbox, error) {
	var r sandboxRow
	if err := s.Scan(&r.id, &r.tenant, &r.profile, &r.runtime, &r.riskLevel, &r.state, &r.image,
		&r.resources, &r.env, &r.metadata, &r.containerID, &r.failureReason, &r.resourceVersion,
		&r.createdAt, &r.updatedAt, &r.expiresAt, &r.instance); err != nil {
		return nil, err
	}
	sb := &sandbox.Sandbox{
		ID: r.id, Tenant: r.tenant, Profile: r.profile, Runtime: sandbox.Runtime(r.runtime),
		RiskLevel: sandbox.RiskLevel(r.riskLevel), State: sandbox.State(r.state), Image: r.image,
		ContainerID: r.containerID, FailureReason: r.failureReason, ResourceVersion: r.resourceVersion,
		Instance: r.instance,
	}
	var err error
	if err = decodeJSON("resources", sql.NullString{String: r.resources, Valid: true}, &sb.Resources); err != nil {
		return nil, err
	}
	if err = decodeJSON("env", r.env, &sb.Env); err != nil {
		return nil, err
	}
	if err = decodeJSON("metadata", r.metadata, &sb.Metadata); err != nil {
		return nil, err
	}
	if sb.CreatedAt, err = decodeTime("created_at", r.createdAt); err != nil {
		return nil, err
	}
	if sb.UpdatedAt, err = decodeTime("updated_at", r.updatedAt); err != nil {
		return nil, err
	}
	if sb.ExpiresAt, err = decodeOptTime("expires_at", r.expiresAt); err != nil {
		return nil, err
	}
	return sb, nil
}

// CreateSandbox inserts sb with ResourceVersion 1 and sets sb.ResourceVersion
// to 1. A duplicate ID returns errdefs.ErrAlreadyExists.
func (s *Store) CreateSandbox(ctx context.Context, sb *sandbox.Sandbox) error {
	if sb == nil || sb.ID == "" {
		return fmt.Errorf("create sandbox: missing id: %w", errdefs.ErrInvalidArgument)
	}
	r, err := encodeSandbox(sb)
	if err != nil {
		return fmt.Errorf("create sandbox %s: %w", sb.ID, err)
	}
	r.resourceVersion = 1
	_, err = s.writer.ExecContext(ctx, `INSERT INTO sandboxes (`+sandboxColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.id, r.tenant, r.profile, r.runtime, r.riskLevel, r.state, r.image, r.resources, r.env, r.metadata,
		r.containerID, r.failureReason, r.resourceVersion, r.createdAt, r.updatedAt, r.expiresAt, r.instance)
	if err != nil {
		if isUniqueViolation(err) {
			return fmt.Errorf("sandbox %s: %w", sb.ID, errdefs.ErrAlreadyExists)
		}
		return dbError(ctx, "create sandbox "+sb.ID, err)
	}
	sb.ResourceVersion = 1
	return nil
}

// GetSandbox returns one sandbox. tenant "" matches any tenant; a sandbox of
// another tenant is reported as not found.
func (s *Store) GetSandbox(ctx context.Context, tenant, id string) (*sandbox.Sandbox, error) {
	sb, err := getSandbox(ctx, s.reader, id)
	if err != nil {
		return nil, err
	}
	if tenant != "" && sb.Tenant != tenant {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return sb, nil
}

func getSandbox(ctx context.Context, q queryer, id string) (*sandbox.Sandbox, error) {
	sb, err := scanSandbox(q.QueryRowContext(ctx, `SELECT `+sandboxColumns+` FROM sandboxes WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, dbError(ctx, "get sandbox "+id, err)
	}
	return sb, nil
}

// ListSandboxes returns the sandboxes matching f, oldest first (by CreatedAt,
// then insertion order).
func (s *Store) ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]*sandbox.Sandbox, error) {
	if err := store.CheckLimit("list sandboxes", f.Limit); err != nil {
		return nil, err
	}
	var where []string
	var args []any
	if f.Tenant != "" {
		where = append(where, "tenant = ?")
		args = append(args, f.Tenant)
	}
	if len(f.States) > 0 {
		where = append(where, "state IN ("+placeholders(len(f.States))+")")
		for _, st := range f.States {
			args = append(args, string(st))
		}
	}
	if f.Profile != "" {
		where = append(where, "profile = ?")
		args = append(args, f.Profile)
	}
	if f.Instance != "" {
		where = append(where, "instance = ?")
		args = append(args, f.Instance)
	}
	if f.ExcludeFinal {
		var final []any
		for _, st := range sandbox.AllStates {
			if st.Final() {
				final = append(final, string(st))
			}
		}
		where = append(where, "state NOT IN ("+placeholders(len(final))+")")
		args = append(args, final...)
	}
	for k, v := range f.Metadata {
		where = append(where, "EXISTS (SELECT 1 FROM json_each(sandboxes.metadata) AS m WHERE m.key = ? AND m.type = 'text' AND m.value = ?)")
		args = append(args, k, v)
	}
	q, args := oldestFirst(`SELECT `+sandboxColumns+` FROM sandboxes`, where, args, f.Limit)
	return appendRows(ctx, s.reader, nil, "list sandboxes", scanSandbox, q, args...)
}

// UpdateSandbox applies fn to the current record inside one write
// transaction and stores the result with ResourceVersion+1 and UpdatedAt =
// now (UTC). If ifVersion is non-zero and differs from the stored version it
// returns errdefs.ErrPreconditionFailed without calling fn. An error from fn
// aborts the update and is returned unchanged. Changes fn makes to ID, Tenant
// or CreatedAt are ignored. fn runs while the store's write connection is
// held: it must be quick and must not call the store.
func (s *Store) UpdateSandbox(ctx context.Context, id string, ifVersion int64, now time.Time, fn func(*sandbox.Sandbox) error) (*sandbox.Sandbox, error) {
	get := func(tx queryer) (*sandbox.Sandbox, error) { return getSandbox(ctx, tx, id) }
	return updateRow(ctx, s, "sandbox "+id, get, func(tx *sql.Tx, cur *sandbox.Sandbox) (*sandbox.Sandbox, error) {
		if err := store.CheckVersion("sandbox "+id, cur.ResourceVersion, ifVersion); err != nil {
			return nil, err
		}
		next := store.CloneSandbox(cur) // fn may change next freely; cur stays as stored
		if err := fn(next); err != nil {
			return nil, err
		}
		next.ID, next.Tenant, next.CreatedAt = cur.ID, cur.Tenant, cur.CreatedAt
		next.ResourceVersion = cur.ResourceVersion + 1
		next.UpdatedAt = now.UTC()
		store.NormalizeSandbox(next)
		r, err := encodeSandbox(next)
		if err != nil {
			return nil, fmt.Errorf("update sandbox %s: %w", id, err)
		}
		res, err := tx.ExecContext(ctx, `UPDATE sandboxes SET profile = ?, runtime = ?, risk_level = ?, state = ?,
			image = ?, resources = ?, env = ?, metadata = ?, container_id = ?, failure_reason = ?,
			resource_version = ?, updated_at = ?, expires_at = ?
			WHERE id = ? AND resource_version = ?`,
			r.profile, r.runtime, r.riskLevel, r.state, r.image, r.resources, r.env, r.metadata,
			r.containerID, r.failureReason, r.resourceVersion, r.updatedAt, r.expiresAt,
			cur.ID, cur.ResourceVersion)
		if err != nil {
			return nil, dbError(ctx, "update sandbox "+id, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			// Unreachable while this transaction holds the write lock.
			return nil, fmt.Errorf("update sandbox %s: record changed during update (%d rows, %v): %w", id, n, err, errdefs.ErrConflict)
		}
		return next, nil
	})
}

// placeholders returns "?, ?, …" with n marks.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}
