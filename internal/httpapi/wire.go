package httpapi

import "genesis.dev/sandbox/internal/apiwire"

// The conversions mcp.go calls by these names; every conversion itself is in
// package apiwire (shared with the gRPC edge). The other handlers call
// apiwire directly.
var (
	mcpApprovalWire     = apiwire.MCPApproval
	mcpCatalogEntryWire = apiwire.MCPCatalogEntry
	mcpCreateIn         = apiwire.MCPCreateIn
	mcpPinWire          = apiwire.MCPPin
	mcpPinsWire         = apiwire.MCPPins
	mcpServerWire       = apiwire.MCPServer
)
