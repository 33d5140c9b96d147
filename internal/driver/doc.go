// Package driver is the runtime-driver seam: the contract every runtime
// backend (Docker today; Kubernetes, Kata, Firecracker later) implements.
//
// The contract is small and ctx-first. Optional behaviour is an optional
// interface plus a capability flag. Drivers never import store or control;
// they know containers, not tenants or jobs. The exported conformance suite
// in driver/drivertest must pass for every implementation.
package driver
