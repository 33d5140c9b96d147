// Package storetest is the conformance suite of the store contract. Every
// store.Store implementation (store/sqlite, later store/postgres) runs Run
// from its own tests, so that they all behave the same way.
//
// Beyond the words of the contract, the suite fixes these behaviours:
// times round-trip as the same instant, in UTC, to the nanosecond; a nil and
// an empty map or command are interchangeable; ExpiresAt, StartedAt,
// FinishedAt and ExitCode keep nil apart from a zero value; CreateSandbox sets
// the caller's ResourceVersion to 1; List results are ordered by CreatedAt;
// unknown IDs are errdefs.ErrNotFound for every method, including
// UpdateSandbox with a non-zero ifVersion; UpdateSandbox and UpdateJob never
// let fn change the ID, Tenant or CreatedAt (nor a job's SandboxID); every job
// the suite creates belongs to a sandbox created first.
//
// It imports store, sandbox and errdefs and the standard library's testing
// package; it must not import an implementation.
package storetest
