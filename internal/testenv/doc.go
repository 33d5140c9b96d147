// Package testenv gives integration tests in any package the shared real
// environment: a Docker driver (skipped with a reason when Docker does not
// answer, failed instead when CI=true), the genesis-agent binary built once
// per test binary, a tiny busybox image built locally without a registry,
// the runtimes to test (runc and runsc), and a Debian mirror on loopback
// made of the image builder's package cache (ServeDebMirror), so that
// image builds in tests reach no other machine.
//
// It is imported only by _test.go files. It may import driver/docker and
// the domain packages; nothing in production code may import it.
package testenv
