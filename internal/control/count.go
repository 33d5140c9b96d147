package control

import (
	"context"

	"genesis.dev/sandbox/internal/sandbox"
)

// CountSandboxesByState returns how many sandboxes (of every tenant) the
// store holds in each state, in one store query; a state without sandboxes
// is absent from the map.
func (s *Service) CountSandboxesByState(ctx context.Context) (map[sandbox.State]int, error) {
	return s.store.CountSandboxesByState(ctx)
}
