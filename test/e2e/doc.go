// Package e2e holds the end-to-end tests of Genesis Sandbox: they build the
// real binaries (sandbox-service, genesis, genesis-agent), start the service
// on loopback against the real Docker daemon, and drive it over real HTTP
// with the public client package and the genesis CLI, under runc and runsc.
//
// The tests skip when Docker does not answer (and fail instead when CI is
// "true"); they fail when a profile image they need is not built, since
// `make test` builds those first (`make test-images`).
//
// The package has no non-test code. Its tests may import the public client
// package and internal packages for inspection (testenv, the store), but
// never drive the service through anything but its HTTP API and the CLI.
package e2e
