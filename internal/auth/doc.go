// Package auth answers who holds an API key, for every edge: the keys of
// the config (compared in constant time, only their hashes kept) beside
// the stored keys of tenancy (looked up on every call, so a revocation
// takes effect at once), an admin key acting for another tenant, and the
// second check of something a key took earlier (a terminal ticket) as it
// is used.
//
// It imports tenancy (its Authenticate and tenants), tenant, api (a
// header's name) and errdefs; never an edge, the SDK, the store or a
// driver (internal/layering states the rule).
package auth
