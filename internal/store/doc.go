// Package store is the state-store contract: sandboxes, jobs, sessions,
// leases, networks, artifacts, tenants and the audit log, and the rules
// every implementation applies the same way (ApplyClaim, ApplyReturn and
// the field-keeping rules of the Update methods, NextSandbox, NextJob, …).
// The implementation is store/sqlstore over database/sql, opened on SQLite
// by store/sqlite (the embedded default) and on PostgreSQL by
// store/postgres; the exported conformance suite in store/storetest must
// pass for each.
//
// The store knows records only; it must not import driver, control or httpapi.
package store
