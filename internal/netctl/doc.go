// Package netctl runs the networking of sandboxes on the host: the one
// egress gateway container of a service instance (its start, health
// checks, restarts with backoff, and its removal at the end of a drain),
// each networked sandbox's own internal network with the gateway joined
// to it, the network records and their statuses (pending, active,
// enforcement_down, removed), policy changes of running sandboxes, the
// egress events pulled from the gateway into the store, and the removal of
// networks whose sandbox is gone. Networked modes fail closed: a mode this
// host cannot enforce is refused, never opened.
//
// It sits below control: control imports it (one *Networks per Service)
// and calls it from sandbox create, destroy and reconcile, and keeps the
// tenant-facing calls (the tenant and state checks, the NetworkChange
// hooks). netctl knows no sandbox lifecycle: the caller tells it which
// sandboxes are live.
//
// It may import driver (containers and networks), the store's contract,
// config, egress and its client, sandbox and errdefs; it must not
// import control, the workload packages, httpapi or the public client
// package (internal/layering checks this).
package netctl
