// Package mcp is the host side of one sandboxed MCP server: it speaks to the
// server over its stdio (a Transport over the job's stdout and streamed
// stdin), and serves it to any number of unmodified MCP clients over one
// Streamable HTTP endpoint, under a tool policy.
//
// The protocol is the official Go SDK's on both sides: an sdk Client session
// to the backend and an sdk Server whose receiving middleware forwards the
// backend's features (tools, resources, prompts, completion) through the
// policy. So each downstream session has its own JSON-RPC ids (a client
// reusing ids cannot see another's answer), progress tokens are rewritten per
// call, a dropped call is cancelled at the backend, and SSE streams resume by
// Last-Event-ID from the service's event store.
//
// What the package adds to the SDK is policy: a backend that writes a line
// that is not JSON, or one longer than the cap, is killed and the reason kept
// (Breach); per-call timeouts reset on progress up to a ceiling; tool
// allow/deny applied to tools/list and tools/call alike (a hidden tool answers
// exactly as a missing one); arguments validated against the tool's
// inputSchema; pins of each tool's definition with rug-pull detection; and a
// record of every call for audit.
//
// It imports only errdefs of this module; it knows nothing of sandboxes,
// leases or the API (internal/mcp/servers places servers in sandboxes).
package mcp
