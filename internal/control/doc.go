// Package control is the lifecycle core: sandboxes (create, start,
// destroy, workspace quotas, rollback), warm pools, leases and their
// recycling, admission and tenant quotas, tenants and API keys, audit, the
// capability probe, the egress gateway and per-sandbox networks, and
// reconciliation with the runtime (orphans, TTLs, stale directories).
//
// Everything that works inside a running sandbox lives above it, in the
// workload packages (jobs, files, artifacts, interactive, ports), which
// reach a sandbox through Attach — the one tenant and running check, the
// agent client and busy accounting — and follow the sandboxes' lives
// through the hooks control declares (SandboxReady, SandboxEnding,
// Recover, Sweep) and cmd registers with AddHook.
//
// It may import driver, store, the agent client and protocol, policy,
// config, images, imagebuild (for the progress of the background image
// builds it is given, never to build), admission, diskquota, egress and
// its client, tenant, sandbox and errdefs; it must not import the
// workload packages, httpapi or the public client package
// (internal/layering checks both).
package control
