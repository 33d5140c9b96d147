package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

const sandboxColumns = `id, tenant, profile, runtime, risk_level, state, image, resources, env, metadata,
	container_id, failure_reason, resource_version, created_at, updated_at, expires_at, instance`

// querier is what record reads need from a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// sandboxRow is a sandbox in its stored form.
type sandboxRow struct {
	id, tenant, profile, runtime, riskLevel, state, image string
	resources, env, metadata                              []byte
	containerID, failureReason                            string
	resourceVersion                                       int64
	createdAt, updatedAt                                  int64
	expiresAt                                             *int64
	instance                                              string
}

func (r *sandboxRow) args() []any {
	return []any{r.id, r.tenant, r.profile, r.runtime, r.riskLevel, r.state, r.image, r.resources, r.env,
		r.metadata, r.containerID, r.failureReason, r.resourceVersion, r.createdAt, r.updatedAt, r.expiresAt, r.instance}
}

func encodeSandbox(sb *sandbox.Sandbox) (*sandboxRow, error) {
	r := &sandboxRow{
		id: sb.ID, tenant: sb.Tenant, profile: sb.Profile, runtime: string(sb.Runtime),
		riskLevel: string(sb.RiskLevel), state: string(sb.State), image: sb.Image,
		containerID: sb.ContainerID, failureReason: sb.FailureReason, resourceVersion: sb.ResourceVersion,
		instance: sb.Instance,
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

func scanSandbox(row pgx.Row) (*sandbox.Sandbox, error) {
	var r sandboxRow
	if err := row.Scan(&r.id, &r.tenant, &r.profile, &r.runtime, &r.riskLevel, &r.state, &r.image,
		&r.resources, &r.env, &r.metadata, &r.containerID, &r.failureReason, &r.resourceVersion,
		&r.createdAt, &r.updatedAt, &r.expiresAt, &r.instance); err != nil {
		return nil, err
	}
	sb := &sandbox.Sandbox{
		ID: r.id, Tenant: r.tenant, Profile: r.profile, Runtime: sandbox.Runtime(r.runtime),
		RiskLevel: sandbox.RiskLevel(r.riskLevel), State: sandbox.State(r.state), Image: r.image,
		ContainerID: r.containerID, FailureReason: r.failureReason, ResourceVersion: r.resourceVersion,
		Instance:  r.instance,
		CreatedAt: decodeTime(r.createdAt), UpdatedAt: decodeTime(r.updatedAt), ExpiresAt: decodeOptTime(r.expiresAt),
	}
	if err := decodeJSON("resources", r.resources, &sb.Resources); err != nil {
		return nil, err
	}
	if err := decodeJSON("env", r.env, &sb.Env); err != nil {
		return nil, err
	}
	if err := decodeJSON("metadata", r.metadata, &sb.Metadata); err != nil {
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
	_, err = s.pool.Exec(ctx, `INSERT INTO sandboxes (`+sandboxColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`, r.args()...)
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
	sb, err := getSandbox(ctx, s.pool, id, "")
	if err != nil {
		return nil, err
	}
	if tenant != "" && sb.Tenant != tenant {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return sb, nil
}

// getSandbox reads one sandbox; lock is "" or a locking clause such as
// "FOR UPDATE".
func getSandbox(ctx context.Context, q querier, id, lock string) (*sandbox.Sandbox, error) {
	sb, err := scanSandbox(q.QueryRow(ctx, `SELECT `+sandboxColumns+` FROM sandboxes WHERE id = $1 `+lock, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, dbError(ctx, "get sandbox "+id, err)
	}
	return sb, nil
}

// args numbers query parameters as they are added.
type args []any

// add appends v and returns its placeholder ($1, $2, …).
func (a *args) add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// ListSandboxes returns the sandboxes matching f, oldest first (by CreatedAt,
// then insertion order).
func (s *Store) ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]*sandbox.Sandbox, error) {
	if err := store.CheckLimit("list sandboxes", f.Limit); err != nil {
		return nil, err
	}
	var where []string
	var a args
	if f.Tenant != "" {
		where = append(where, "tenant = "+a.add(f.Tenant))
	}
	if len(f.States) > 0 {
		where = append(where, "state = ANY("+a.add(stateStrings(f.States))+")")
	}
	if f.Profile != "" {
		where = append(where, "profile = "+a.add(f.Profile))
	}
	if f.Instance != "" {
		where = append(where, "instance = "+a.add(f.Instance))
	}
	if f.ExcludeFinal {
		var final []sandbox.State
		for _, st := range sandbox.AllStates {
			if st.Final() {
				final = append(final, st)
			}
		}
		where = append(where, "state <> ALL("+a.add(stateStrings(final))+")")
	}
	if len(f.Metadata) > 0 {
		// Containment of a flat object of strings: every pair must be present
		// with exactly that string value.
		m, err := encodeJSON("metadata filter", f.Metadata, false)
		if err != nil {
			return nil, fmt.Errorf("list sandboxes: %w", err)
		}
		where = append(where, "metadata @> "+a.add(m)+"::jsonb")
	}
	q := oldestFirst(`SELECT `+sandboxColumns+` FROM sandboxes`, where, &a, f.Limit)
	rows, err := s.pool.Query(ctx, q, a...)
	return collectRows(ctx, "list sandboxes", nil, scanSandbox, rows, err)
}

func stateStrings[S ~string](states []S) []string {
	out := make([]string, len(states))
	for i, st := range states {
		out[i] = string(st)
	}
	return out
}

// UpdateSandbox applies fn to the current record and stores the result with
// ResourceVersion+1 and UpdatedAt = now (UTC). The row is read with SELECT …
// FOR UPDATE in one transaction, so concurrent updates of a sandbox, from
// this process or another one, run one after the other and never lose a
// write. If ifVersion is non-zero and differs from the stored version it
// returns errdefs.ErrPreconditionFailed without calling fn. An error from fn
// aborts the update and is returned unchanged. Changes fn makes to ID, Tenant
// or CreatedAt are ignored. fn runs while the row lock and a pool connection
// are held: it must be quick and must not call the store.
func (s *Store) UpdateSandbox(ctx context.Context, id string, ifVersion int64, now time.Time, fn func(*sandbox.Sandbox) error) (*sandbox.Sandbox, error) {
	var next *sandbox.Sandbox
	err := s.inTx(ctx, "update sandbox "+id, func(tx pgx.Tx) error {
		cur, err := getSandbox(ctx, tx, id, "FOR UPDATE")
		if err != nil {
			return err
		}
		if err := store.CheckVersion("sandbox "+id, cur.ResourceVersion, ifVersion); err != nil {
			return err
		}
		next = store.CloneSandbox(cur) // fn may change next freely; cur stays as stored
		if err := fn(next); err != nil {
			return err
		}
		next.ID, next.Tenant, next.CreatedAt = cur.ID, cur.Tenant, cur.CreatedAt
		next.ResourceVersion = cur.ResourceVersion + 1
		next.UpdatedAt = now.UTC()
		store.NormalizeSandbox(next)
		r, err := encodeSandbox(next)
		if err != nil {
			return fmt.Errorf("update sandbox %s: %w", id, err)
		}
		tag, err := tx.Exec(ctx, `UPDATE sandboxes SET profile = $1, runtime = $2, risk_level = $3, state = $4,
			image = $5, resources = $6, env = $7, metadata = $8, container_id = $9, failure_reason = $10,
			resource_version = $11, updated_at = $12, expires_at = $13
			WHERE id = $14 AND resource_version = $15`,
			r.profile, r.runtime, r.riskLevel, r.state, r.image, r.resources, r.env, r.metadata,
			r.containerID, r.failureReason, r.resourceVersion, r.updatedAt, r.expiresAt,
			cur.ID, cur.ResourceVersion)
		if err != nil {
			return dbError(ctx, "update sandbox "+id, err)
		}
		if n := tag.RowsAffected(); n != 1 {
			// Unreachable while this transaction holds the row lock.
			return fmt.Errorf("update sandbox %s: record changed during update (%d rows): %w", id, n, errdefs.ErrConflict)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return next, nil
}
