package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

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
		return fmt.Errorf("create sandbox network %s: %w: %w", n.SandboxID, errdefs.ErrInvalidArgument, err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO sandbox_networks (sandbox_id, tenant, status, resource_version, doc) VALUES ($1, $2, $3, 1, $4)`,
		rec.SandboxID, rec.Tenant, string(rec.Status), doc)
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

func getSandboxNetwork(ctx context.Context, q querier, tenant, id, lock string) (*sandbox.Network, error) {
	var t string
	var doc []byte
	err := q.QueryRow(ctx, `SELECT tenant, doc FROM sandbox_networks WHERE sandbox_id = $1 `+lock, id).Scan(&t, &doc)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && tenant != "" && t != tenant) {
		return nil, fmt.Errorf("network of sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, dbError(ctx, "get sandbox network "+id, err)
	}
	var n sandbox.Network
	if err := json.Unmarshal(doc, &n); err != nil {
		return nil, fmt.Errorf("network of sandbox %s: corrupt record: %w: %w", id, errdefs.ErrInternal, err)
	}
	return &n, nil
}

// GetSandboxNetwork returns a sandbox's network record.
func (s *Store) GetSandboxNetwork(ctx context.Context, tenant, id string) (*sandbox.Network, error) {
	return getSandboxNetwork(ctx, s.pool, tenant, id, "")
}

// UpdateSandboxNetwork applies fn and stores the result under the row lock.
func (s *Store) UpdateSandboxNetwork(ctx context.Context, id string, ifVersion int64, now time.Time, fn func(*sandbox.Network) error) (*sandbox.Network, error) {
	var next sandbox.Network
	err := s.inTx(ctx, "update sandbox network "+id, func(tx pgx.Tx) error {
		cur, err := getSandboxNetwork(ctx, tx, "", id, "FOR UPDATE")
		if err != nil {
			return err
		}
		if err := store.CheckVersion("network of sandbox "+id, cur.ResourceVersion, ifVersion); err != nil {
			return err
		}
		next = *cur
		if err := fn(&next); err != nil {
			return err
		}
		next.SandboxID, next.Tenant = cur.SandboxID, cur.Tenant
		next.ResourceVersion, next.UpdatedAt = cur.ResourceVersion+1, now.UTC()
		doc, err := json.Marshal(&next)
		if err != nil {
			return fmt.Errorf("update sandbox network %s: %w: %w", id, errdefs.ErrInvalidArgument, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE sandbox_networks SET status = $1, resource_version = $2, doc = $3 WHERE sandbox_id = $4`,
			string(next.Status), next.ResourceVersion, doc, id); err != nil {
			return dbError(ctx, "update sandbox network "+id, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &next, nil
}

// ListSandboxNetworks returns the records with one of statuses (all when empty).
func (s *Store) ListSandboxNetworks(ctx context.Context, statuses ...sandbox.NetworkStatus) ([]*sandbox.Network, error) {
	want := make([]string, 0, len(statuses))
	for _, st := range statuses {
		want = append(want, string(st))
	}
	rows, err := s.pool.Query(ctx, `SELECT doc FROM sandbox_networks WHERE cardinality($1::text[]) = 0 OR status = ANY($1) ORDER BY sandbox_id`, want)
	if err != nil {
		return nil, dbError(ctx, "list sandbox networks", err)
	}
	defer rows.Close()
	var out []*sandbox.Network
	for rows.Next() {
		var doc []byte
		if err := rows.Scan(&doc); err != nil {
			return nil, dbError(ctx, "list sandbox networks", err)
		}
		var n sandbox.Network
		if err := json.Unmarshal(doc, &n); err != nil {
			return nil, fmt.Errorf("sandbox network: corrupt record: %w: %w", errdefs.ErrInternal, err)
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
func (s *Store) AppendNetworkEvents(ctx context.Context, events []sandbox.NetworkEvent) error {
	if len(events) == 0 {
		return nil
	}
	return s.inTx(ctx, "append network events", func(tx pgx.Tx) error {
		for _, e := range events {
			ts, err := encodeTime("time", e.Time)
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `INSERT INTO network_events (sandbox_id, time, name, address, port, proto, decision, reason, bytes_up, bytes_down)
				SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10 WHERE EXISTS (SELECT 1 FROM sandboxes WHERE id = $1)`,
				e.SandboxID, ts, e.Name, e.Address, e.Port, e.Proto, e.Decision, e.Reason, e.BytesUp, e.BytesDown)
			if err != nil {
				return dbError(ctx, "append network events", err)
			}
		}
		return nil
	})
}

// ListNetworkEvents returns up to limit events of a sandbox after a cursor.
func (s *Store) ListNetworkEvents(ctx context.Context, sandboxID string, after int64, limit int) ([]sandbox.NetworkEvent, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("list network events: limit must be positive: %w", errdefs.ErrInvalidArgument)
	}
	rows, err := s.pool.Query(ctx, `SELECT id, time, name, address, port, proto, decision, reason, bytes_up, bytes_down
		FROM network_events WHERE sandbox_id = $1 AND id > $2 ORDER BY id LIMIT $3`, sandboxID, after, limit)
	if err != nil {
		return nil, dbError(ctx, "list network events", err)
	}
	defer rows.Close()
	out := []sandbox.NetworkEvent{}
	for rows.Next() {
		e := sandbox.NetworkEvent{SandboxID: sandboxID}
		var ts int64
		if err := rows.Scan(&e.Cursor, &ts, &e.Name, &e.Address, &e.Port, &e.Proto, &e.Decision, &e.Reason, &e.BytesUp, &e.BytesDown); err != nil {
			return nil, dbError(ctx, "list network events", err)
		}
		e.Time = decodeTime(ts)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(ctx, "list network events", err)
	}
	return out, nil
}
