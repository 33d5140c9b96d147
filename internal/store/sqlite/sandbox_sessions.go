package sqlite

import (
	"context"
	"encoding/json"

	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// ListSandboxSessions returns every session of a sandbox, oldest first.
func (s *Store) ListSandboxSessions(ctx context.Context, sandboxID string) ([]*sandbox.Session, error) {
	out, err := appendRows(ctx, s.reader, []*sandbox.Session{}, "list sessions of "+sandboxID, func(r scanner) (*sandbox.Session, error) {
		var doc string
		if err := r.Scan(&doc); err != nil {
			return nil, err
		}
		var se sandbox.Session
		return &se, json.Unmarshal([]byte(doc), &se)
	}, `SELECT doc FROM sessions WHERE sandbox_id = ?`, sandboxID)
	if err != nil {
		return nil, err
	}
	store.SortSessions(out)
	return out, nil
}
