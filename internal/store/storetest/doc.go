// Package storetest is the conformance suite of the store contract. Every
// store.Store implementation (store/sqlstore, on SQLite files, in-memory
// SQLite and PostgreSQL) runs Run from its own tests, so that they all
// behave the same way. Bench measures the hot paths.
//
// Beyond the words of the contract, the suite fixes these behaviours:
// times round-trip as the same instant, in UTC, to the nanosecond; a nil and
// an empty map or command are interchangeable; ExpiresAt, StartedAt,
// FinishedAt and ExitCode keep nil apart from a zero value; CreateSandbox sets
// the caller's ResourceVersion to 1; List results are ordered by CreatedAt;
// unknown IDs are errdefs.ErrNotFound for every method, including
// UpdateSandbox with a non-zero ifVersion; UpdateSandbox and UpdateJob never
// let fn change the fields store.NextSandbox and store.NextJob keep (ID,
// Tenant, CreatedAt, a sandbox's Instance, a job's SandboxID and Mode);
// every job the suite creates belongs to a sandbox created first.
//
// It imports store, sandbox and errdefs and the standard library's testing
// package; it must not import an implementation.
package storetest
