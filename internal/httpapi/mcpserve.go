package httpapi

import (
	"context"
	"time"

	"genesis.dev/sandbox/internal/mcpserve"
	"genesis.dev/sandbox/internal/tenant"
)

// mcpServeRoutes mounts the service's own MCP server, its sandbox tools
// (internal/mcpserve), over Streamable HTTP with the tenant's API key:
//
//	POST|GET|DELETE /v1/mcp/sandbox   the sandbox tools MCP server (the tenant's API key)
//
// A missing or wrong key is a 401 problem before any MCP exchange.
func (s *Server) mcpServeRoutes() {
	if s.mcpServe == nil {
		return
	}
	edge := mcpserve.Edge{PrincipalOf: principalOf}
	if s.ports != nil {
		edge.PreviewLink = func(ctx context.Context, by tenant.Principal, sandboxID string, port int, ttl time.Duration) (string, time.Time, error) {
			if ttl == 0 {
				ttl = min(time.Hour, s.ports.MaxLinkTTL())
			}
			token, exp, err := s.ports.NewLink(ctx, by, sandboxID, port, ttl)
			if err != nil {
				return "", time.Time{}, err
			}
			return s.previewURL(sandboxID, port, "/", "", token), exp, nil
		}
	}
	h := mcpserve.RefusalsAsProblems(s.mcpServe.Handler(edge), s.writeProblem)
	for _, m := range []string{"POST", "GET", "DELETE"} {
		s.handle(m, "/v1/mcp/sandbox", true, h)
	}
}
