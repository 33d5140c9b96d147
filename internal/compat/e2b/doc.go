// Package e2b serves the E2B SDKs' APIs over the service's own application
// services, so that code written against `e2b` and `@e2b/code-interpreter`
// runs here unmodified (docs/compat-e2b.md).
//
// It translates, it does not reimplement: sandboxes are control's leases
// (create, timeout and kill are acquire, renew and release), commands are
// jobs' background jobs streamed from their durable logs, files go through
// the file gateway and the code interpreter runs in jobs' code contexts;
// pause (a hibernation), resume, auto-pause at the timeout (control's
// ExpiryHook), snapshots and forks are the snapshots manager's; volumes and
// their content API (/volumecontent, with a per-volume token) are named
// volumes and their files (volumes.Manager).
// The in-sandbox agent API (Connect-RPC process and filesystem services)
// is served with connect-go from the .proto files in proto/ (generated
// code in gen/, made by `make proto`).
//
// Import rules (internal/layering): it sits beside httpapi, which mounts
// it. It may import control, jobs, files, snapshots, volumes, config, sandbox,
// tenant (the caller's key, which its tokens name), errdefs and its
// generated code; it must not import httpapi, client, the store, a
// driver, the job log or the agent packages.
package e2b
