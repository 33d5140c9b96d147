// Package files is the file gateway of running sandboxes: stat, list,
// read, write, move, delete, chmod, search, replace, archives and
// all-or-nothing multipart uploads. It applies the path policy (the
// profile's file roots) and limits.files on the service side, so a bad
// path is refused before a body streams, and calls the sandbox's agent,
// which applies the policy again inside the sandbox.
//
// It reaches a sandbox only through control's Attach (a small interface it
// declares). It may import control, config, agentclient, agentproto and
// errdefs; it must not import httpapi, store, driver or the other workload
// packages.
package files
