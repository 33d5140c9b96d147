// Package controltest is the harness the control, jobs and httpapi tests
// share: the service as cmd/sandbox-service builds it (assemble.Build: the
// control service and every manager, hooked in the same order) over the
// fake driver, a SQLite store in a temporary directory, an injected clock,
// and one real genesis-agent host process per started fake container (the
// fake runs no containers, so its Start hook runs the agent listening on
// the socket in the sandbox's run directory, as the profile user like the
// container would, and its Remove hook stops it).
//
// It is imported only by _test.go files. It may import assemble, control,
// the fake driver, the SQLite store and testenv; nothing in production
// code may import it.
package controltest
