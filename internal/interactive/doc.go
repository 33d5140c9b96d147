// Package interactive owns the interactive connections into running
// sandboxes: terminals today. Its Hub holds the one rule the agent does not
// know — one writer at a time, observers read only, a takeover switches the
// writer — over any byte stream, so that other interactive streams (a VNC
// connection) can share the same roles.
//
// It reaches a sandbox only through control's Attach (a small interface it
// declares), and closes its connections when control reports, through the
// SandboxEnding hook, that a sandbox ends.
//
// ServeWebSocket speaks the terminal's WebSocket protocol (api's
// TerminalMessage control messages beside raw bytes) over a connection the
// edge accepted.
//
// It may import control, agentclient, agentproto, sandbox, errdefs, api and
// the WebSocket library; it must not import httpapi, store, driver or the
// other workload packages.
package interactive
