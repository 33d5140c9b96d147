// Package sandbox holds the domain types of Genesis Sandbox: sandbox and job
// records, their states and the one transition table, risk levels, resources
// and identifiers. It is pure: no I/O, no clock (callers pass now), and it
// imports only errdefs.
package sandbox
