package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
)

// ListSandboxSessions returns every session of a sandbox, oldest first.
func (s *Store) ListSandboxSessions(ctx context.Context, sandboxID string) ([]*sandbox.Session, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT doc FROM sessions WHERE sandbox_id = ?`, sandboxID)
	if err != nil {
		return nil, dbError(ctx, "list sessions of "+sandboxID, err)
	}
	defer rows.Close()
	out := []*sandbox.Session{}
	for rows.Next() {
		var doc string
		if err := rows.Scan(&doc); err != nil {
			return nil, dbError(ctx, "list sessions of "+sandboxID, err)
		}
		var se sandbox.Session
		if err := json.Unmarshal([]byte(doc), &se); err != nil {
			return nil, fmt.Errorf("session of %s: corrupt record: %v: %w", sandboxID, err, errdefs.ErrInternal)
		}
		out = append(out, &se)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(ctx, "list sessions of "+sandboxID, err)
	}
	store.SortSessions(out)
	return out, nil
}
