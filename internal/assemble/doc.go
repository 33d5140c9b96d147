// Package assemble builds the service: the control service and every
// manager over it (jobs, services, artifacts, files, terminals, ports,
// browser, desktop, MCP servers, skills, trace) and the compatibility
// adapters (E2B, OpenSandbox), in one ordered list. The list is the
// service's wiring in one place: control hooks are registered in its order,
// and at shutdown the parts are drained and closed in reverse (the
// pattern of containerd's Server.Stop).
//
// cmd/sandbox-service builds the service with Build and keeps only what
// is a process's (flags, listeners, signals, the banner); the test harness
// (internal/controltest) builds it with the same Build, so the tests run
// the wiring the service runs.
//
// A capability is one more line of the list in Build: its package's
// manager, built over the parts before it; its hooks, Drain and Close are
// found by type assertion.
//
// Import rule (internal/layering): assemble may import every package below
// the HTTP edge; it imports no httpapi, client or cmd package, and only
// cmd/sandbox-service and internal/controltest import it.
package assemble
