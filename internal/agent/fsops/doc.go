// Package fsops carries out the agent's file operations inside a sandbox:
// every path is resolved below an allowed root with openat-style calls that
// refuse to leave it (no check-then-use), and files are read, written,
// listed, moved, archived, extracted and searched through those
// descriptors. The agent's HTTP routes (internal/agent, files.go) decode
// requests and call the functions of api.go.
//
// It imports only the standard library, agentproto, errdefs and
// golang.org/x/sys/unix, since it is part of the static agent binary that
// runs inside untrusted containers; it knows nothing of HTTP routing or of
// the agent's process supervision.
package fsops
