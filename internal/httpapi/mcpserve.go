package httpapi

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
	h := s.mcpServe.Handler(principalOf)
	for _, m := range []string{"POST", "GET", "DELETE"} {
		s.handle(m, "/v1/mcp/sandbox", true, h.ServeHTTP)
	}
}
