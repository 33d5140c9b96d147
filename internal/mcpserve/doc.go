// Package mcpserve serves the service's own sandbox tools as an MCP server
// (Streamable HTTP): create and destroy a sandbox, run a command, run code
// in a persistent context, write, read and list files, start a background
// job and read its log, drive a browser and a desktop (screenshots as
// image content), make a preview link of a port, and snapshot and fork a
// sandbox. Every tool calls the managers the HTTP handlers call (control,
// jobs, files, browser, desktop, ports, snapshots) as the tenant whose
// API key the edge checked, so tenant ceilings, risk policy and the trace
// apply as on HTTP; each call is also written to the audit log.
//
// Sandboxes an MCP session creates belong to it: they are destroyed when
// the session ends (the client's DELETE, the idle timeout, or the service
// closing), unless created with keep: true.
//
// Import rule (internal/layering): mcpserve may import control, jobs,
// files, browser, snapshots, the job log (to read a job's output),
// sandbox, tenant, errdefs, the API's wire types (api: the browser's and
// the desktop's actions) and the agent's protocol types (agentclient only
// for the file response type of its Files contract); it imports no HTTP
// edge, client, command, store, driver or admission package. The HTTP
// edge mounts its Handler behind its own key check.
package mcpserve
