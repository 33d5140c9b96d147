package postgres

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// ListSandboxSessions returns every session of a sandbox, oldest first.
func (s *Store) ListSandboxSessions(ctx context.Context, sandboxID string) ([]*sandbox.Session, error) {
	rows, err := s.pool.Query(ctx, `SELECT doc FROM sessions WHERE sandbox_id = $1`, sandboxID)
	out, err := collectRows(ctx, "list sessions of "+sandboxID, []*sandbox.Session{}, func(r pgx.Row) (*sandbox.Session, error) {
		var doc []byte
		if err := r.Scan(&doc); err != nil {
			return nil, err
		}
		var se sandbox.Session
		return &se, json.Unmarshal(doc, &se)
	}, rows, err)
	if err != nil {
		return nil, err
	}
	store.SortSessions(out)
	return out, nil
}
