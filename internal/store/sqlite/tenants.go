package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/tenant"
)

func tenantRow(t *tenant.Tenant) (doc, created, updated string, err error) {
	// The whole record is the document; name, version and times are also
	// columns, and the columns win when reading.
	b, err := json.Marshal(t)
	if err != nil {
		return "", "", "", fmt.Errorf("encode tenant %s: %v: %w", t.Name, err, errdefs.ErrInvalidArgument)
	}
	if created, err = encodeTime("created_at", t.CreatedAt); err != nil {
		return "", "", "", err
	}
	if updated, err = encodeTime("updated_at", t.UpdatedAt); err != nil {
		return "", "", "", err
	}
	return string(b), created, updated, nil
}

const tenantColumns = `name, doc, resource_version, created_at, updated_at`

func scanTenant(s scanner) (*tenant.Tenant, error) {
	var t tenant.Tenant
	var name, doc, created, updated string
	var version int64
	if err := s.Scan(&name, &doc, &version, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(doc), &t); err != nil {
		return nil, fmt.Errorf("tenant %s: corrupt record: %v: %w", name, err, errdefs.ErrInternal)
	}
	t.Name, t.ResourceVersion = name, version
	var err error
	if t.CreatedAt, err = decodeTime("created_at", created); err != nil {
		return nil, err
	}
	if t.UpdatedAt, err = decodeTime("updated_at", updated); err != nil {
		return nil, err
	}
	return &t, nil
}

func getTenant(ctx context.Context, q queryer, name string) (*tenant.Tenant, error) {
	t, err := scanTenant(q.QueryRowContext(ctx, `SELECT `+tenantColumns+` FROM tenants WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
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
	_, err = s.writer.ExecContext(ctx, `INSERT INTO tenants (`+tenantColumns+`) VALUES (?, ?, 1, ?, ?)`, t.Name, doc, created, updated)
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
func (s *Store) PutTenant(ctx context.Context, t *tenant.Tenant) (_ *tenant.Tenant, err error) {
	doc, created, updated, err := tenantRow(t)
	if err != nil {
		return nil, err
	}
	_, err = s.writer.ExecContext(ctx, `INSERT INTO tenants (`+tenantColumns+`) VALUES (?, ?, 1, ?, ?)
		ON CONFLICT (name) DO UPDATE SET doc = excluded.doc, updated_at = excluded.updated_at,
		resource_version = tenants.resource_version + 1`, t.Name, doc, created, updated)
	if err != nil {
		return nil, dbError(ctx, "put tenant "+t.Name, err)
	}
	return getTenant(ctx, s.writer, t.Name)
}

// GetTenant returns one tenant.
func (s *Store) GetTenant(ctx context.Context, name string) (*tenant.Tenant, error) {
	return getTenant(ctx, s.reader, name)
}

// ListTenants returns every tenant in name order.
func (s *Store) ListTenants(ctx context.Context) ([]*tenant.Tenant, error) {
	return appendRows(ctx, s.reader, []*tenant.Tenant{}, "list tenants", scanTenant, `SELECT `+tenantColumns+` FROM tenants ORDER BY name`)
}

// UpdateTenant applies fn to the stored tenant in one write transaction.
func (s *Store) UpdateTenant(ctx context.Context, name string, ifVersion int64, now time.Time, fn func(*tenant.Tenant) error) (*tenant.Tenant, error) {
	get := func(tx queryer) (*tenant.Tenant, error) { return getTenant(ctx, tx, name) }
	return updateRow(ctx, s, "tenant "+name, get, func(tx *sql.Tx, cur *tenant.Tenant) (*tenant.Tenant, error) {
		if err := store.CheckVersion("tenant "+name, cur.ResourceVersion, ifVersion); err != nil {
			return nil, err
		}
		next := *cur
		if err := fn(&next); err != nil {
			return nil, err
		}
		next.Name, next.Source, next.CreatedAt = cur.Name, cur.Source, cur.CreatedAt
		next.ResourceVersion, next.UpdatedAt = cur.ResourceVersion+1, now.UTC()
		doc, _, updated, err := tenantRow(&next)
		if err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tenants SET doc = ?, resource_version = ?, updated_at = ? WHERE name = ?`,
			doc, next.ResourceVersion, updated, name); err != nil {
			return nil, dbError(ctx, "update tenant "+name, err)
		}
		return &next, nil
	})
}

// DeleteTenant removes a tenant and its keys.
func (s *Store) DeleteTenant(ctx context.Context, name string, ifVersion int64) (err error) {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return dbError(ctx, "delete tenant "+name, err)
	}
	defer func() { _ = tx.Rollback() }()
	cur, err := getTenant(ctx, tx, name)
	if err != nil {
		return err
	}
	if err := store.CheckVersion("tenant "+name, cur.ResourceVersion, ifVersion); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM api_keys WHERE tenant = ?`, name); err != nil {
		return dbError(ctx, "delete keys of tenant "+name, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM tenants WHERE name = ?`, name); err != nil {
		return dbError(ctx, "delete tenant "+name, err)
	}
	if err := tx.Commit(); err != nil {
		return dbError(ctx, "commit delete of tenant "+name, err)
	}
	return nil
}

const keyColumns = `id, tenant, hash, prefix, description, created_at, revoked_at`

func scanKey(s scanner) (*tenant.Key, error) {
	var k tenant.Key
	var hash []byte
	var created string
	var revoked sql.NullString
	if err := s.Scan(&k.ID, &k.Tenant, &hash, &k.Prefix, &k.Description, &created, &revoked); err != nil {
		return nil, err
	}
	if len(hash) != len(k.Hash) {
		return nil, fmt.Errorf("key %s: stored hash has %d bytes: %w", k.ID, len(hash), errdefs.ErrInternal)
	}
	copy(k.Hash[:], hash)
	var err error
	if k.CreatedAt, err = decodeTime("created_at", created); err != nil {
		return nil, err
	}
	if k.RevokedAt, err = decodeOptTime("revoked_at", revoked); err != nil {
		return nil, err
	}
	return &k, nil
}

// CreateKey inserts a key of an existing tenant.
func (s *Store) CreateKey(ctx context.Context, k *tenant.Key) (err error) {
	created, err := encodeTime("created_at", k.CreatedAt)
	if err != nil {
		return err
	}
	revoked, err := encodeOptTime("revoked_at", k.RevokedAt)
	if err != nil {
		return err
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return dbError(ctx, "create key", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := getTenant(ctx, tx, k.Tenant); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO api_keys (`+keyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.Tenant, k.Hash[:], k.Prefix, k.Description, created, revoked)
	if isUniqueViolation(err) {
		return fmt.Errorf("key %s: %w", k.ID, errdefs.ErrAlreadyExists)
	}
	if err != nil {
		return dbError(ctx, "create key "+k.ID, err)
	}
	if err := tx.Commit(); err != nil {
		return dbError(ctx, "commit key "+k.ID, err)
	}
	return nil
}

// KeyByHash returns the key with this hash.
func (s *Store) KeyByHash(ctx context.Context, hash [32]byte) (*tenant.Key, error) {
	k, err := scanKey(s.reader.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE hash = ?`, hash[:]))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("API key: %w", errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, dbError(ctx, "look up key", err)
	}
	return k, nil
}

// ListKeys returns a tenant's keys, oldest first.
func (s *Store) ListKeys(ctx context.Context, name string) ([]*tenant.Key, error) {
	return appendRows(ctx, s.reader, []*tenant.Key{}, "list keys", scanKey,
		`SELECT `+keyColumns+` FROM api_keys WHERE tenant = ? ORDER BY created_at, rowid`, name)
}

// RevokeKey marks a key of tenant revoked at now (once).
func (s *Store) RevokeKey(ctx context.Context, name, id string, now time.Time) (*tenant.Key, error) {
	at, err := encodeTime("revoked_at", now)
	if err != nil {
		return nil, err
	}
	if _, err := s.writer.ExecContext(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ? AND tenant = ?`, at, id, name); err != nil {
		return nil, dbError(ctx, "revoke key "+id, err)
	}
	k, err := scanKey(s.writer.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE id = ? AND tenant = ?`, id, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("key %s of tenant %s: %w", id, name, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, dbError(ctx, "revoke key "+id, err)
	}
	return k, nil
}
