// Package testenv gives integration tests in any package the shared real
// environment: a Docker driver (skipped with a reason when Docker does not
// answer, failed instead when CI=true), the genesis-agent binary built once
// per test binary, a tiny busybox image built locally without a registry,
// and the runtimes to test (runc and runsc).
//
// It is imported only by _test.go files. It may import driver/docker and
// the domain packages; nothing in production code may import it.
package testenv
