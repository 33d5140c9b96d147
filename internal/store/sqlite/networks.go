package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// CreateSandboxNetwork inserts a sandbox's network record.
func (s *Store) CreateSandboxNetwork(ctx context.Context, n *sandbox.Network) error {
	if n == nil || n.SandboxID == "" {
		return fmt.Errorf("create sandbox network: missing sandbox id: %w", errdefs.ErrInvalidArgument)
	}
	rec := *n
	rec.ResourceVersion, rec.UpdatedAt = 1, n.UpdatedAt.UTC()
	doc, err := json.Marshal(&rec)
	if err != nil {
		return fmt.Errorf("create sandbox network %s: %v: %w", n.SandboxID, err, errdefs.ErrInvalidArgument)
	}
	_, err = s.writer.ExecContext(ctx, `INSERT INTO sandbox_networks (sandbox_id, tenant, status, resource_version, doc) VALUES (?, ?, ?, 1, ?)`,
		rec.SandboxID, rec.Tenant, string(rec.Status), string(doc))
	switch {
	case err == nil:
		n.ResourceVersion, n.UpdatedAt = 1, rec.UpdatedAt
		return nil
	case isUniqueViolation(err):
		return fmt.Errorf("network of sandbox %s: %w", n.SandboxID, errdefs.ErrAlreadyExists)
	case isForeignKeyViolation(err):
		return fmt.Errorf("network of sandbox %s: %w", n.SandboxID, errdefs.ErrNotFound)
	}
	return dbError(ctx, "create sandbox network "+n.SandboxID, err)
}

func getSandboxNetwork(ctx context.Context, q queryer, tenant, id string) (*sandbox.Network, error) {
	var t, doc string
	err := q.QueryRowContext(ctx, `SELECT tenant, doc FROM sandbox_networks WHERE sandbox_id = ?`, id).Scan(&t, &doc)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && tenant != "" && t != tenant) {
		return nil, fmt.Errorf("network of sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, dbError(ctx, "get sandbox network "+id, err)
	}
	var n sandbox.Network
	if err := json.Unmarshal([]byte(doc), &n); err != nil {
		return nil, fmt.Errorf("network of sandbox %s: corrupt record: %v: %w", id, err, errdefs.ErrInternal)
	}
	return &n, nil
}

// GetSandboxNetwork returns a sandbox's network record.
func (s *Store) GetSandboxNetwork(ctx context.Context, tenant, id string) (*sandbox.Network, error) {
	return getSandboxNetwork(ctx, s.reader, tenant, id)
}

// UpdateSandboxNetwork applies fn and stores the result in one transaction.
func (s *Store) UpdateSandboxNetwork(ctx context.Context, id string, ifVersion int64, now time.Time, fn func(*sandbox.Network) error) (*sandbox.Network, error) {
	get := func(tx queryer) (*sandbox.Network, error) { return getSandboxNetwork(ctx, tx, "", id) }
	return updateRow(ctx, s, "sandbox network "+id, get, func(tx *sql.Tx, cur *sandbox.Network) (*sandbox.Network, error) {
		if err := store.CheckVersion("network of sandbox "+id, cur.ResourceVersion, ifVersion); err != nil {
			return nil, err
		}
		next := *cur
		if err := fn(&next); err != nil {
			return nil, err
		}
		next.SandboxID, next.Tenant = cur.SandboxID, cur.Tenant
		next.ResourceVersion, next.UpdatedAt = cur.ResourceVersion+1, now.UTC()
		doc, err := json.Marshal(&next)
		if err != nil {
			return nil, fmt.Errorf("update sandbox network %s: %v: %w", id, err, errdefs.ErrInvalidArgument)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sandbox_networks SET status = ?, resource_version = ?, doc = ? WHERE sandbox_id = ?`,
			string(next.Status), next.ResourceVersion, string(doc), id); err != nil {
			return nil, dbError(ctx, "update sandbox network "+id, err)
		}
		return &next, nil
	})
}

// ListSandboxNetworks returns the records with one of statuses (all when empty).
func (s *Store) ListSandboxNetworks(ctx context.Context, statuses ...sandbox.NetworkStatus) ([]*sandbox.Network, error) {
	q := `SELECT doc FROM sandbox_networks`
	args := make([]any, 0, len(statuses))
	if len(statuses) > 0 {
		q += ` WHERE status IN (?` + strings.Repeat(", ?", len(statuses)-1) + `)`
		for _, st := range statuses {
			args = append(args, string(st))
		}
	}
	rows, err := s.reader.QueryContext(ctx, q+` ORDER BY sandbox_id`, args...)
	if err != nil {
		return nil, dbError(ctx, "list sandbox networks", err)
	}
	defer rows.Close()
	var out []*sandbox.Network
	for rows.Next() {
		var doc string
		if err := rows.Scan(&doc); err != nil {
			return nil, dbError(ctx, "list sandbox networks", err)
		}
		var n sandbox.Network
		if err := json.Unmarshal([]byte(doc), &n); err != nil {
			return nil, fmt.Errorf("sandbox network: corrupt record: %v: %w", err, errdefs.ErrInternal)
		}
		out = append(out, &n)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(ctx, "list sandbox networks", err)
	}
	return out, nil
}

// AppendNetworkEvents records events in one transaction; events of unknown
// sandboxes are dropped.
func (s *Store) AppendNetworkEvents(ctx context.Context, events []sandbox.NetworkEvent) (err error) {
	if len(events) == 0 {
		return nil
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return dbError(ctx, "append network events", err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, e := range events {
		ts, err := encodeTime("time", e.Time)
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO network_events (sandbox_id, time, name, address, port, proto, decision, reason, bytes_up, bytes_down)
			SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM sandboxes WHERE id = ?)`,
			e.SandboxID, ts, e.Name, e.Address, e.Port, e.Proto, e.Decision, e.Reason, e.BytesUp, e.BytesDown, e.SandboxID)
		if err != nil {
			return dbError(ctx, "append network events", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return dbError(ctx, "commit network events", err)
	}
	return nil
}

// ListNetworkEvents returns up to limit events of a sandbox after a cursor.
func (s *Store) ListNetworkEvents(ctx context.Context, sandboxID string, after int64, limit int) ([]sandbox.NetworkEvent, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("list network events: limit must be positive: %w", errdefs.ErrInvalidArgument)
	}
	rows, err := s.reader.QueryContext(ctx, `SELECT id, time, name, address, port, proto, decision, reason, bytes_up, bytes_down
		FROM network_events WHERE sandbox_id = ? AND id > ? ORDER BY id LIMIT ?`, sandboxID, after, limit)
	if err != nil {
		return nil, dbError(ctx, "list network events", err)
	}
	defer rows.Close()
	out := []sandbox.NetworkEvent{}
	for rows.Next() {
		e := sandbox.NetworkEvent{SandboxID: sandboxID}
		var ts string
		if err := rows.Scan(&e.Cursor, &ts, &e.Name, &e.Address, &e.Port, &e.Proto, &e.Decision, &e.Reason, &e.BytesUp, &e.BytesDown); err != nil {
			return nil, dbError(ctx, "list network events", err)
		}
		if e.Time, err = decodeTime("time", ts); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(ctx, "list network events", err)
	}
	return out, nil
}
