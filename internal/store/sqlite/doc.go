// Package sqlite is the embedded state store: it implements store.Store on a
// single SQLite file with the pure-Go modernc.org/sqlite driver.
//
// It owns the database file, its connection settings (WAL journal, 5 s busy
// timeout, foreign keys, synchronous NORMAL) and the versioned schema
// migrations embedded under migrations/. All writes go through one connection
// that begins its transactions with BEGIN IMMEDIATE, so read-modify-write
// updates are serialized and never lose a write; reads use a separate pool of
// read-only connections. A ":memory:" path gives a private in-memory database
// on a single connection, for tests.
//
// Beyond the store contract, a job must name an existing sandbox (a foreign
// key): CreateJob for an unknown sandbox fails with errdefs.ErrNotFound.
//
// The package knows records only: it imports sandbox, store and errdefs and
// must not import driver, control or httpapi.
package sqlite
