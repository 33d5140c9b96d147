// Package pgtest gives tests a throwaway PostgreSQL: one cluster per test
// binary, created with initdb in a temporary directory (under /dev/shm when
// there is one: a memory file system makes initdb and CREATE DATABASE several
// times faster) and listening on 127.0.0.1 on a free port, and a fresh, empty
// database for every Start, dropped when its test ends.
//
// A package that uses it runs its tests through Main, which stops the
// cluster and removes its directory when the tests end:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// The postmaster is a direct child of the test binary with a parent-death
// signal, so it also goes away when the binary dies without reaching the end
// of Main (a test timeout, a kill). Its directory is left behind then, and
// removed by the next cluster made while neither its test binary nor its
// postmaster runs.
// initdb and postgres refuse to run as root: under root the cluster runs as
// the "postgres" user, or "nobody" when there is none.
//
// Start skips the test when no PostgreSQL binaries are installed (initdb and
// postgres in /usr/lib/postgresql/*/bin or on PATH), except when the
// environment variable CI is "true": there it fails.
//
// The package keeps the cluster in package state, since it is shared by
// every test of the binary. It must only be imported by tests.
package pgtest
