package store

import (
	"context"
	"slices"
	"strings"

	"genesis.dev/sandbox/internal/sandbox"
)

// SandboxSessions lists the sessions of one sandbox, so that a sandbox
// handed to another holder can end the previous holder's sessions.
type SandboxSessions interface {
	// ListSandboxSessions returns every session (shell sessions and code
	// contexts, of any tenant and state) of sandboxID, oldest first; none is
	// an empty list, not an error.
	ListSandboxSessions(ctx context.Context, sandboxID string) ([]*sandbox.Session, error)
}

// SortSessions orders sessions oldest first (by id on a tie).
func SortSessions(list []*sandbox.Session) {
	slices.SortFunc(list, func(a, b *sandbox.Session) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}
