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

// CreateSandboxNetwork inserts a sandbox's network record.
func (s *Store) CreateSandboxNetwork(ctx context.Context, n *sandbox.Network) error {
	if n == nil || n.SandboxID == "" {
		return errdefs.Invalid("create sandbox network: missing sandbox id")
	}
	rec := *n
	rec.ResourceVersion, rec.UpdatedAt = 1, n.UpdatedAt.UTC()
	doc, err := marshalDoc("create sandbox network "+n.SandboxID, &rec)
	if err != nil {
		return err
	}
	_, err = s.writer.ExecContext(ctx, s.q(`INSERT INTO sandbox_networks (sandbox_id, tenant, status, resource_version, doc) VALUES (?, ?, ?, 1, ?)`),
		rec.SandboxID, rec.Tenant, string(rec.Status), doc)
	switch {
	case err == nil:
		n.ResourceVersion, n.UpdatedAt = 1, rec.UpdatedAt
		return nil
	case s.isUniqueViolation(err):
		return fmt.Errorf("network of sandbox %s: %w", n.SandboxID, errdefs.ErrAlreadyExists)
	case s.isForeignKeyViolation(err):
		return fmt.Errorf("network of sandbox %s: %w", n.SandboxID, errdefs.ErrNotFound)
	}
	return s.dbError(ctx, "create sandbox network "+n.SandboxID, err)
}

func (s *Store) getSandboxNetwork(ctx context.Context, q queryer, tenant, id, lock string) (*sandbox.Network, error) {
	return getDoc[sandbox.Network](ctx, s, q, `SELECT tenant, doc FROM sandbox_networks WHERE sandbox_id = ? `+lock, "network of sandbox", tenant, id)
}

// GetSandboxNetwork returns a sandbox's network record.
func (s *Store) GetSandboxNetwork(ctx context.Context, tenant, id string) (*sandbox.Network, error) {
	return s.getSandboxNetwork(ctx, s.reader, tenant, id, "")
}

// UpdateSandboxNetwork applies fn and stores the result as store.NextNetwork
// makes it, in one write transaction holding the row.
func (s *Store) UpdateSandboxNetwork(ctx context.Context, id string, ifVersion int64, now time.Time, fn func(*sandbox.Network) error) (*sandbox.Network, error) {
	get := func(tx *sql.Tx) (*sandbox.Network, error) { return s.getSandboxNetwork(ctx, tx, "", id, s.d.RowLock()) }
	return update(ctx, s, "sandbox network "+id, get, func(tx *sql.Tx, cur *sandbox.Network) (*sandbox.Network, error) {
		if err := store.CheckVersion("network of sandbox "+id, cur.ResourceVersion, ifVersion); err != nil {
			return nil, err
		}
		next := *cur
		if err := fn(&next); err != nil {
			return nil, err
		}
		store.NextNetwork(cur, &next, now)
		doc, err := marshalDoc("update sandbox network "+id, &next)
		if err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE sandbox_networks SET status = ?, resource_version = ?, doc = ? WHERE sandbox_id = ?`),
			string(next.Status), next.ResourceVersion, doc, id); err != nil {
			return nil, s.dbError(ctx, "update sandbox network "+id, err)
		}
		return &next, nil
	})
}

// ListSandboxNetworks returns the records with one of statuses (all when empty).
func (s *Store) ListSandboxNetworks(ctx context.Context, statuses ...sandbox.NetworkStatus) ([]*sandbox.Network, error) {
	var c conds
	in(&c, "status", "IN", statuses)
	return appendRows(ctx, s, s.reader, nil, "list sandbox networks", func(r scanner) (*sandbox.Network, error) {
		var doc string
		if err := r.Scan(&doc); err != nil {
			return nil, err
		}
		var n sandbox.Network
		return &n, unmarshalDoc("sandbox network", doc, &n)
	}, c.sql(`SELECT doc FROM sandbox_networks`)+` ORDER BY sandbox_id`, c.args...)
}

// AppendNetworkEvents records events in one transaction; events of unknown
// sandboxes are dropped.
func (s *Store) AppendNetworkEvents(ctx context.Context, events []sandbox.NetworkEvent) error {
	if len(events) == 0 {
		return nil
	}
	return s.inTx(ctx, "append network events", func(tx *sql.Tx) error {
		for _, e := range events {
			ts, err := s.encodeTime("time", e.Time)
			if err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, s.q(`INSERT INTO network_events (sandbox_id, time, duration_ms, name, address, port, proto, decision, reason, bytes_up, bytes_down)
				SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM sandboxes WHERE id = ?)`),
				e.SandboxID, ts, e.DurationMS, e.Name, e.Address, e.Port, e.Proto, e.Decision, e.Reason, e.BytesUp, e.BytesDown, e.SandboxID)
			if err != nil {
				return s.dbError(ctx, "append network events", err)
			}
		}
		return nil
	})
}

// ListNetworkEvents returns up to limit events of a sandbox after a cursor.
func (s *Store) ListNetworkEvents(ctx context.Context, sandboxID string, after int64, limit int) ([]sandbox.NetworkEvent, error) {
	if limit <= 0 {
		return nil, errdefs.Invalid("list network events: limit must be positive")
	}
	return appendRows(ctx, s, s.reader, []sandbox.NetworkEvent{}, "list network events", func(r scanner) (sandbox.NetworkEvent, error) {
		e := sandbox.NetworkEvent{SandboxID: sandboxID}
		var ts dbTime
		err := r.Scan(&e.Cursor, &ts, &e.DurationMS, &e.Name, &e.Address, &e.Port, &e.Proto, &e.Decision, &e.Reason, &e.BytesUp, &e.BytesDown)
		e.Time = ts.t
		return e, err
	}, `SELECT id, time, duration_ms, name, address, port, proto, decision, reason, bytes_up, bytes_down
		FROM network_events WHERE sandbox_id = ? AND id > ? ORDER BY id LIMIT ?`, sandboxID, after, limit)
}
