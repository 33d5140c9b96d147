package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/tenant"
)

const tenantColumns = `name, doc, resource_version, created_at, updated_at`

// tenantRow encodes t: the whole record is the document; name, version and
// times are also columns, and the columns win when reading.
func (s *Store) tenantRow(t *tenant.Tenant) (doc string, created, updated any, err error) {
	if doc, err = marshalDoc("encode tenant "+t.Name, t); err != nil {
		return "", nil, nil, err
	}
	if created, err = s.encodeTime("created_at", t.CreatedAt); err != nil {
		return "", nil, nil, err
	}
	if updated, err = s.encodeTime("updated_at", t.UpdatedAt); err != nil {
		return "", nil, nil, err
	}
	return doc, created, updated, nil
}

func scanTenant(row scanner) (*tenant.Tenant, error) {
	var t tenant.Tenant
	var name, doc string
	var version int64
	var created, updated dbTime
	if err := row.Scan(&name, &doc, &version, &created, &updated); err != nil {
		return nil, err
	}
	if err := unmarshalDoc("tenant "+name, doc, &t); err != nil {
		return nil, err
	}
	t.Name, t.ResourceVersion, t.CreatedAt, t.UpdatedAt = name, version, created.t, updated.t
	return &t, nil
}

func (s *Store) getTenant(ctx context.Context, q queryer, name, lock string) (*tenant.Tenant, error) {
	return getRow(ctx, s, q, "tenant", name, scanTenant, `SELECT `+tenantColumns+` FROM tenants WHERE name = ? `+lock)
}

// CreateTenant inserts a new tenant with ResourceVersion 1.
func (s *Store) CreateTenant(ctx context.Context, t *tenant.Tenant) error {
	doc, created, updated, err := s.tenantRow(t)
	if err != nil {
		return err
	}
	_, err = s.writer.ExecContext(ctx, s.q(`INSERT INTO tenants (`+tenantColumns+`) VALUES (?, ?, 1, ?, ?)`), t.Name, doc, created, updated)
	switch {
	case err == nil:
		t.ResourceVersion = 1
		return nil
	case s.isUniqueViolation(err):
		return fmt.Errorf("tenant %s: %w", t.Name, errdefs.ErrAlreadyExists)
	}
	return s.dbError(ctx, "create tenant "+t.Name, err)
}

// PutTenant inserts t or replaces the stored tenant of that name (an
// upsert), keeping its creation time.
func (s *Store) PutTenant(ctx context.Context, t *tenant.Tenant) (*tenant.Tenant, error) {
	doc, created, updated, err := s.tenantRow(t)
	if err != nil {
		return nil, err
	}
	_, err = s.writer.ExecContext(ctx, s.q(`INSERT INTO tenants (`+tenantColumns+`) VALUES (?, ?, 1, ?, ?)
		ON CONFLICT (name) DO UPDATE SET doc = excluded.doc, updated_at = excluded.updated_at,
		resource_version = tenants.resource_version + 1`), t.Name, doc, created, updated)
	if err != nil {
		return nil, s.dbError(ctx, "put tenant "+t.Name, err)
	}
	return s.getTenant(ctx, s.writer, t.Name, "")
}

// GetTenant returns one tenant.
func (s *Store) GetTenant(ctx context.Context, name string) (*tenant.Tenant, error) {
	return s.getTenant(ctx, s.reader, name, "")
}

// ListTenants returns every tenant in name order.
func (s *Store) ListTenants(ctx context.Context) ([]*tenant.Tenant, error) {
	return appendRows(ctx, s, s.reader, []*tenant.Tenant{}, "list tenants", scanTenant, `SELECT `+tenantColumns+` FROM tenants ORDER BY name`)
}

// UpdateTenant applies fn to the stored tenant and stores the result as
// store.NextTenant makes it, in one write transaction holding the row.
func (s *Store) UpdateTenant(ctx context.Context, name string, ifVersion int64, now time.Time, fn func(*tenant.Tenant) error) (*tenant.Tenant, error) {
	get := func(tx *sql.Tx) (*tenant.Tenant, error) { return s.getTenant(ctx, tx, name, s.d.RowLock()) }
	return update(ctx, s, "tenant "+name, get, func(tx *sql.Tx, cur *tenant.Tenant) (*tenant.Tenant, error) {
		if err := store.CheckVersion("tenant "+name, cur.ResourceVersion, ifVersion); err != nil {
			return nil, err
		}
		next := *cur
		if err := fn(&next); err != nil {
			return nil, err
		}
		store.NextTenant(cur, &next, now)
		doc, _, updated, err := s.tenantRow(&next)
		if err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE tenants SET doc = ?, resource_version = ?, updated_at = ? WHERE name = ?`),
			doc, next.ResourceVersion, updated, name); err != nil {
			return nil, s.dbError(ctx, "update tenant "+name, err)
		}
		return &next, nil
	})
}

// DeleteTenant removes a tenant and (by cascade) its keys.
func (s *Store) DeleteTenant(ctx context.Context, name string, ifVersion int64) error {
	return s.inTx(ctx, "delete tenant "+name, func(tx *sql.Tx) error {
		cur, err := s.getTenant(ctx, tx, name, s.d.RowLock())
		if err != nil {
			return err
		}
		if err := store.CheckVersion("tenant "+name, cur.ResourceVersion, ifVersion); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM tenants WHERE name = ?`), name); err != nil {
			return s.dbError(ctx, "delete tenant "+name, err)
		}
		return nil
	})
}

const keyColumns = `id, tenant, hash, prefix, description, created_at, revoked_at, scopes`

func scanKey(row scanner) (*tenant.Key, error) {
	var k tenant.Key
	var hash []byte
	var created, revoked dbTime
	var scopes string
	if err := row.Scan(&k.ID, &k.Tenant, &hash, &k.Prefix, &k.Description, &created, &revoked, &scopes); err != nil {
		return nil, err
	}
	k.Scopes = strings.Fields(scopes)
	if len(hash) != len(k.Hash) {
		return nil, fmt.Errorf("key %s: stored hash has %d bytes: %w", k.ID, len(hash), errdefs.ErrInternal)
	}
	copy(k.Hash[:], hash)
	k.CreatedAt, k.RevokedAt = created.t, revoked.ptr()
	return &k, nil
}

// CreateKey inserts a key of an existing tenant.
func (s *Store) CreateKey(ctx context.Context, k *tenant.Key) error {
	created, err := s.encodeTime("created_at", k.CreatedAt)
	if err != nil {
		return err
	}
	revoked, err := s.encodeOptTime("revoked_at", k.RevokedAt)
	if err != nil {
		return err
	}
	_, err = s.writer.ExecContext(ctx, s.q(`INSERT INTO api_keys (`+keyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
		k.ID, k.Tenant, k.Hash[:], k.Prefix, k.Description, created, revoked, strings.Join(k.Scopes, " "))
	switch {
	case err == nil:
		return nil
	case s.isUniqueViolation(err):
		return fmt.Errorf("key %s: %w", k.ID, errdefs.ErrAlreadyExists)
	case s.isForeignKeyViolation(err):
		return fmt.Errorf("tenant %s: %w", k.Tenant, errdefs.ErrNotFound)
	}
	return s.dbError(ctx, "create key "+k.ID, err)
}

// KeyByHash returns the key with this hash.
func (s *Store) KeyByHash(ctx context.Context, hash [32]byte) (*tenant.Key, error) {
	k, err := scanKey(s.reader.QueryRowContext(ctx, s.q(`SELECT `+keyColumns+` FROM api_keys WHERE hash = ?`), hash[:]))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("API key: %w", errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, s.dbError(ctx, "look up key", err)
	}
	return k, nil
}

// ListKeys returns a tenant's keys, oldest first.
func (s *Store) ListKeys(ctx context.Context, name string) ([]*tenant.Key, error) {
	return appendRows(ctx, s, s.reader, []*tenant.Key{}, "list keys", scanKey,
		`SELECT `+keyColumns+` FROM api_keys WHERE tenant = ? ORDER BY created_at, `+s.d.InsertOrder(), name)
}

// RevokeKey marks a key of tenant revoked at now (once).
func (s *Store) RevokeKey(ctx context.Context, name, id string, now time.Time) (*tenant.Key, error) {
	at, err := s.encodeTime("revoked_at", now)
	if err != nil {
		return nil, err
	}
	k, err := scanKey(s.writer.QueryRowContext(ctx, s.q(`UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?)
		WHERE id = ? AND tenant = ? RETURNING `+keyColumns), at, id, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("key %s of tenant %s: %w", id, name, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, s.dbError(ctx, "revoke key "+id, err)
	}
	return k, nil
}
