// Package sandbox holds the domain types of Genesis Sandbox: sandbox and job
// records, their states and the one transition table, risk levels, resources
// and identifiers. It is pure: no I/O, no clock (callers pass now), and it
// imports only errdefs — and egress, whose Policy is part of a sandbox's
// Network record (egress itself imports only errdefs; internal/layering
// allows this one exception).
package sandbox
