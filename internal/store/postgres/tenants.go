package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/tenant"
)

const tenantColumns = `name, doc, resource_version, created_at, updated_at`

// tenantRow encodes t: the whole record is the document; name, version and
// times are also columns, and the columns win when reading.
func tenantRow(t *tenant.Tenant) (doc []byte, created, updated int64, err error) {
	if doc, err = json.Marshal(t); err != nil {
		return nil, 0, 0, fmt.Errorf("encode tenant %s: %w: %w", t.Name, errdefs.ErrInvalidArgument, err)
	}
	if created, err = encodeTime("created_at", t.CreatedAt); err != nil {
		return nil, 0, 0, err
	}
	if updated, err = encodeTime("updated_at", t.UpdatedAt); err != nil {
		return nil, 0, 0, err
	}
	return doc, created, updated, nil
}

func scanTenant(row pgx.Row) (*tenant.Tenant, error) {
	var t tenant.Tenant
	var n string
	var doc []byte
	var version, created, updated int64
	if err := row.Scan(&n, &doc, &version, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(doc, &t); err != nil {
		return nil, fmt.Errorf("tenant %s: corrupt record: %w: %w", n, errdefs.ErrInternal, err)
	}
	t.Name, t.ResourceVersion, t.CreatedAt, t.UpdatedAt = n, version, decodeTime(created), decodeTime(updated)
	return &t, nil
}

func getTenant(ctx context.Context, q querier, name, lock string) (*tenant.Tenant, error) {
	t, err := scanTenant(q.QueryRow(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE name = $1 `+lock, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("tenant %s: %w", name, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, dbError(ctx, "get tenant "+name, err)
	}
	return t, nil
}

// CreateTenant inserts a new tenant with ResourceVersion 1.
func (s *Store) CreateTenant(ctx context.Context, t *tenant.Tenant) error {
	doc, created, updated, err := tenantRow(t)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO tenants (`+tenantColumns+`) VALUES ($1, $2, 1, $3, $4)`, t.Name, doc, created, updated)
	switch {
	case err == nil:
		t.ResourceVersion = 1
		return nil
	case isUniqueViolation(err):
		return fmt.Errorf("tenant %s: %w", t.Name, errdefs.ErrAlreadyExists)
	}
	return dbError(ctx, "create tenant "+t.Name, err)
}

// PutTenant inserts t or replaces the stored tenant of that name, keeping
// its creation time.
func (s *Store) PutTenant(ctx context.Context, t *tenant.Tenant) (*tenant.Tenant, error) {
	doc, created, updated, err := tenantRow(t)
	if err != nil {
		return nil, err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO tenants (`+tenantColumns+`) VALUES ($1, $2, 1, $3, $4)
		ON CONFLICT (name) DO UPDATE SET doc = excluded.doc, updated_at = excluded.updated_at,
		resource_version = tenants.resource_version + 1`, t.Name, doc, created, updated)
	if err != nil {
		return nil, dbError(ctx, "put tenant "+t.Name, err)
	}
	return getTenant(ctx, s.pool, t.Name, "")
}

// GetTenant returns one tenant.
func (s *Store) GetTenant(ctx context.Context, name string) (*tenant.Tenant, error) {
	return getTenant(ctx, s.pool, name, "")
}

// ListTenants returns every tenant in name order.
func (s *Store) ListTenants(ctx context.Context) ([]*tenant.Tenant, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tenantColumns+` FROM tenants ORDER BY name`)
	return collectRows(ctx, "list tenants", []*tenant.Tenant{}, scanTenant, rows, err)
}

// UpdateTenant applies fn to the stored tenant in one transaction holding
// its row lock.
func (s *Store) UpdateTenant(ctx context.Context, name string, ifVersion int64, now time.Time, fn func(*tenant.Tenant) error) (*tenant.Tenant, error) {
	var next tenant.Tenant
	err := s.inTx(ctx, "update tenant "+name, func(tx pgx.Tx) error {
		cur, err := getTenant(ctx, tx, name, "FOR UPDATE")
		if err != nil {
			return err
		}
		if err := store.CheckVersion("tenant "+name, cur.ResourceVersion, ifVersion); err != nil {
			return err
		}
		next = *cur
		if err := fn(&next); err != nil {
			return err
		}
		next.Name, next.Source, next.CreatedAt = cur.Name, cur.Source, cur.CreatedAt
		next.ResourceVersion, next.UpdatedAt = cur.ResourceVersion+1, now.UTC()
		doc, _, updated, err := tenantRow(&next)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE tenants SET doc = $1, resource_version = $2, updated_at = $3 WHERE name = $4`,
			doc, next.ResourceVersion, updated, name)
		if err != nil {
			return dbError(ctx, "update tenant "+name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &next, nil
}

// DeleteTenant removes a tenant and (by cascade) its keys.
func (s *Store) DeleteTenant(ctx context.Context, name string, ifVersion int64) error {
	return s.inTx(ctx, "delete tenant "+name, func(tx pgx.Tx) error {
		cur, err := getTenant(ctx, tx, name, "FOR UPDATE")
		if err != nil {
			return err
		}
		if err := store.CheckVersion("tenant "+name, cur.ResourceVersion, ifVersion); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM tenants WHERE name = $1`, name); err != nil {
			return dbError(ctx, "delete tenant "+name, err)
		}
		return nil
	})
}

const keyColumns = `id, tenant, hash, prefix, description, created_at, revoked_at`

func scanKey(row pgx.Row) (*tenant.Key, error) {
	var k tenant.Key
	var hash []byte
	var created int64
	var revoked *int64
	if err := row.Scan(&k.ID, &k.Tenant, &hash, &k.Prefix, &k.Description, &created, &revoked); err != nil {
		return nil, err
	}
	if len(hash) != len(k.Hash) {
		return nil, fmt.Errorf("key %s: stored hash has %d bytes: %w", k.ID, len(hash), errdefs.ErrInternal)
	}
	copy(k.Hash[:], hash)
	k.CreatedAt, k.RevokedAt = decodeTime(created), decodeOptTime(revoked)
	return &k, nil
}

// CreateKey inserts a key of an existing tenant.
func (s *Store) CreateKey(ctx context.Context, k *tenant.Key) error {
	created, err := encodeTime("created_at", k.CreatedAt)
	if err != nil {
		return err
	}
	revoked, err := encodeOptTime("revoked_at", k.RevokedAt)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO api_keys (`+keyColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		k.ID, k.Tenant, k.Hash[:], k.Prefix, k.Description, created, revoked)
	switch {
	case err == nil:
		return nil
	case isUniqueViolation(err):
		return fmt.Errorf("key %s: %w", k.ID, errdefs.ErrAlreadyExists)
	case isForeignKeyViolation(err):
		return fmt.Errorf("tenant %s: %w", k.Tenant, errdefs.ErrNotFound)
	}
	return dbError(ctx, "create key "+k.ID, err)
}

// KeyByHash returns the key with this hash.
func (s *Store) KeyByHash(ctx context.Context, hash [32]byte) (*tenant.Key, error) {
	k, err := scanKey(s.pool.QueryRow(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE hash = $1`, hash[:]))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("API key: %w", errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, dbError(ctx, "look up key", err)
	}
	return k, nil
}

// ListKeys returns a tenant's keys, oldest first.
func (s *Store) ListKeys(ctx context.Context, name string) ([]*tenant.Key, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE tenant = $1 ORDER BY created_at, seq`, name)
	return collectRows(ctx, "list keys", []*tenant.Key{}, scanKey, rows, err)
}

// RevokeKey marks a key of tenant revoked at now (once).
func (s *Store) RevokeKey(ctx context.Context, name, id string, now time.Time) (*tenant.Key, error) {
	at, err := encodeTime("revoked_at", now)
	if err != nil {
		return nil, err
	}
	k, err := scanKey(s.pool.QueryRow(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1)
		WHERE id = $2 AND tenant = $3 RETURNING `+keyColumns, at, id, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("key %s of tenant %s: %w", id, name, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, dbError(ctx, "revoke key "+id, err)
	}
	return k, nil
}
