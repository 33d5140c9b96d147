// Package control is the lifecycle core: sandboxes (create, start,
// destroy, workspace quotas, rollback), warm pools, leases and their
// recycling, admission and tenant quotas, tenants and API keys, audit, the
// capability probe, and reconciliation with the runtime (orphans, TTLs,
// stale directories). The egress gateway and the networks of sandboxes are
// netctl's, below control: control calls it from create, destroy and
// reconcile, and keeps the tenant-facing network calls (the tenant and
// state checks and the NetworkChange hooks).
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
// builds it is given, never to build), admission, diskquota, egress (its
// policy), netctl, tenant, sandbox and errdefs; it must not import the
// workload packages, httpapi or the public client package
// (internal/layering checks both).
package control
