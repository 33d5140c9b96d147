// Package store is the state-store contract: sandboxes and jobs (and later
// leases, sessions, artifacts, tenants, audit). Implementations live in
// store/sqlite (embedded default) and later store/postgres; the exported
// conformance suite in store/storetest must pass for each.
//
// The store knows records only; it must not import driver, control or httpapi.
package store
