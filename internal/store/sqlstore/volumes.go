package sqlstore

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

// CreateVolume inserts a volume record.
func (s *Store) CreateVolume(ctx context.Context, v *sandbox.Volume) error {
	if v == nil || v.ID == "" || v.Tenant == "" || v.Name == "" {
		return errdefs.Invalid("create volume: missing id, tenant or name")
	}
	args, err := s.volumeRow(v)
	if err != nil {
		return err
	}
	_, err = s.writer.ExecContext(ctx, s.q(`INSERT INTO volumes (id, tenant, name, state, size_mb, mounted, created_at, doc)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`), append([]any{v.ID}, args...)...)
	switch {
	case err == nil:
		return nil
	case s.isUniqueViolation(err):
		return fmt.Errorf("volume %s (%s): %w", v.Name, v.ID, errdefs.ErrAlreadyExists)
	}
	return s.dbError(ctx, "create volume "+v.ID, err)
}

// volumeRow is a record's columns after its id.
func (s *Store) volumeRow(v *sandbox.Volume) ([]any, error) {
	created, err := s.encodeTime("created_at", v.CreatedAt)
	if err != nil {
		return nil, err
	}
	doc, err := marshalDoc("volume "+v.ID, v)
	if err != nil {
		return nil, err
	}
	return []any{v.Tenant, v.Name, string(v.State), v.SizeMB, len(v.Mounts) > 0, created, doc}, nil
}

// GetVolume returns tenant's volume called name.
func (s *Store) GetVolume(ctx context.Context, tenant, name string) (*sandbox.Volume, error) {
	var doc string
	err := s.reader.QueryRowContext(ctx, s.q(`SELECT doc FROM volumes WHERE tenant = ? AND name = ?`), tenant, name).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("volume %s: %w", name, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, s.dbError(ctx, "get volume "+name, err)
	}
	var v sandbox.Volume
	if err := unmarshalDoc("volume "+name, doc, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// UpdateVolume applies fn to a volume in one write transaction holding its
// row.
func (s *Store) UpdateVolume(ctx context.Context, id string, now time.Time, fn func(*sandbox.Volume) error) (*sandbox.Volume, error) {
	get := func(tx *sql.Tx) (*sandbox.Volume, error) {
		return getDoc[sandbox.Volume](ctx, s, tx, `SELECT tenant, doc FROM volumes WHERE id = ? `+s.d.RowLock(), "volume", "", id)
	}
	return update(ctx, s, "volume "+id, get, func(tx *sql.Tx, cur *sandbox.Volume) (*sandbox.Volume, error) {
		next := *cur
		next.Mounts = append([]sandbox.VolumeMount(nil), cur.Mounts...)
		if err := fn(&next); err != nil {
			return nil, err
		}
		store.NextVolume(cur, &next, now)
		args, err := s.volumeRow(&next)
		if err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE volumes SET tenant = ?, name = ?, state = ?, size_mb = ?, mounted = ?,
			created_at = ?, doc = ? WHERE id = ?`), append(args, id)...); err != nil {
			return nil, s.dbError(ctx, "update volume "+id, err)
		}
		return &next, nil
	})
}

// ListVolumes returns the volumes matching f, by tenant and name.
func (s *Store) ListVolumes(ctx context.Context, f store.VolumeFilter) ([]*sandbox.Volume, error) {
	var where []string
	var args []any
	if f.Tenant != "" {
		where, args = append(where, "tenant = ?"), append(args, f.Tenant)
	}
	if f.Mounted {
		where, args = append(where, "mounted = ?"), append(args, true)
	}
	q := `SELECT doc FROM volumes`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY tenant, name`
	return appendRows(ctx, s, s.reader, []*sandbox.Volume{}, "list volumes", func(r scanner) (*sandbox.Volume, error) {
		var doc string
		if err := r.Scan(&doc); err != nil {
			return nil, err
		}
		var v sandbox.Volume
		return &v, unmarshalDoc("volume", doc, &v)
	}, q, args...)
}

// DeleteVolume removes a record; a missing one is not an error.
func (s *Store) DeleteVolume(ctx context.Context, id string) error {
	if _, err := s.writer.ExecContext(ctx, s.q(`DELETE FROM volumes WHERE id = ?`), id); err != nil {
		return s.dbError(ctx, "delete volume "+id, err)
	}
	return nil
}

// VolumeUsage counts a tenant's volumes and sums their sizes.
func (s *Store) VolumeUsage(ctx context.Context, tenant string) (int, int64, error) {
	var n int
	var mb sql.NullInt64
	err := s.reader.QueryRowContext(ctx, s.q(`SELECT COUNT(*), SUM(size_mb) FROM volumes WHERE tenant = ?`), tenant).Scan(&n, &mb)
	if err != nil {
		return 0, 0, s.dbError(ctx, "volume usage of "+tenant, err)
	}
	return n, mb.Int64, nil
}
