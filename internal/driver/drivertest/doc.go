// Package drivertest is the conformance suite of the driver contract. Every
// driver.Driver implementation runs Run in its tests: the fake driver on
// every test run, the Docker driver (runc and runsc) wherever Docker answers.
//
// It imports the driver contract, sandbox and errdefs only; it must not
// import any driver implementation.
package drivertest
