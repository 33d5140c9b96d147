// Package tenancy administers who may call the service: the tenants
// (those of the config, written to the store at start, and those made
// through the admin API), their API keys (made, listed, revoked; the
// check of a presented key, Authenticate, and of the key a data-plane
// token names, KeyLive) and the audit log (records written, listed,
// pruned past their retention).
//
// The domain types and their pure logic are internal/tenant's; this
// package is the service over them and the store. What only the lifecycle
// core knows — what a tenant's live sandboxes hold, and the tenant's quota
// lock that every create takes — it asks control for through a small
// interface of its own (Config.Sandboxes); it does not import control.
// Control checks quotas and admission itself, reading tenants' records
// from the store.
//
// It imports config, store (its contract), tenant, sandbox and errdefs;
// it must not import control, the workload packages, httpapi or the
// public client package (internal/layering checks it).
package tenancy
