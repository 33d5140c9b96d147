// Package control is the lifecycle core: sandboxes (create, start,
// destroy, workspace quotas, rollback), warm pools, leases and their
// recycling, admission and tenant quotas, and reconciliation with the
// runtime (orphans, TTLs, stale directories). The capability probe and
// the profiles' views are probe's, below control, which holds one Prober.
// Tenants, API keys and the audit log are internal/tenancy's, above it: it
// asks control for a tenant's live sandboxes and quota lock (LiveSandboxes,
// LockTenant); control reads tenants' records from the store for its
// quotas, weights and policy, and writes its own audit records. The
// egress gateway and the networks of sandboxes are netctl's, below
// control: control calls it from create, destroy and
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
// policy), netctl, probe, tenant, sandbox and errdefs; it must not import the
// workload packages, tenancy, httpapi or the public client package
// (internal/layering checks them).
package control
