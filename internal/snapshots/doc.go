// Package snapshots keeps a sandbox's state beyond its container: pause
// and resume, hibernation to disk and waking, snapshots (files, and under
// runsc processes and memory), new sandboxes from a snapshot, forks and
// rollbacks (docs/snapshots.md, docs/design/snapshots.md).
//
// It holds the snapshots' files on disk (Disk: a directory per snapshot
// with a checksummed manifest) and the orchestration that takes and
// restores them through the lifecycle layer (control) and the driver's
// optional interfaces.
//
// Import rule (internal/layering): a workload package — control, driver,
// store, agentclient, sandbox, config and errdefs; no API or other
// workload.
package snapshots
