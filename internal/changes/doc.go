// Package changes shows and applies changes to a sandbox's workspace: the
// diff of the workspace against a base (the sandbox's creation, its git
// repository's HEAD, a snapshot or another sandbox) as a list of changed
// files and a git-compatible unified diff, and the all-or-nothing
// application of a unified or git patch.
//
// The pure part (ReadTree, Diff, ParsePatch, Apply) works on trees and
// bytes in memory, bounded by Limits. Service reads and writes a running
// sandbox's files only through the file gateway (internal/files), so the
// gateway's path policy and the agent's own apply to every path a patch
// names, and reads a snapshot's workspace through the snapshots manager.
// Parsing and applying patches is github.com/bluekeyes/go-gitdiff (git's
// format, strict application, creates, deletes, renames and modes);
// computing line diffs is github.com/aymanbagabas/go-udiff (the Myers diff
// of Go's own tools); a git base is read with github.com/go-git/go-git/v5
// (its object storage only: no transport).
//
// It imports files, config, sandbox, trace, errdefs and agentclient (the
// type of the gateway's downloads); it declares the small interfaces it
// needs of the gateway, control and snapshots. It must not import httpapi,
// client, the store, a driver or the agent protocol (the gateway applies
// the path policy).
package changes
