// Package control is the application service: the only thing httpapi calls.
// It turns API requests into store records, driver calls and agent calls,
// enforces limits and the runtime policy, rolls back half-made sandboxes,
// caches the capability probe, and reconciles state with the runtime
// (orphan recovery, TTL reaping, lost jobs).
//
// It may import driver, store, agent client, policy, config, images, sandbox
// and errdefs; it must not import httpapi or the public client package.
package control
