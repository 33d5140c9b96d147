package httpapi

import (
	"context"

	"genesis.dev/sandbox/internal/tenant"
)

// Principal answers who holds an API key, by the one key check of every
// route (config keys in constant time, then tenancy.Authenticate): the
// gRPC edge takes it so both edges accept exactly the same keys.
func (s *Server) Principal(ctx context.Context, key string) (tenant.Principal, error) {
	return s.principalOfKey(ctx, key)
}
