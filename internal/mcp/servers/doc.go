// Package servers runs MCP server instances in sandboxes and serves each
// at its own Streamable HTTP endpoint under its own bearer token.
//
// An instance is a stdio MCP server started as a supervised background job
// with a streamed stdin, in a sandbox of its own lease (scope dedicated) or
// of a lease the tenant already holds. Where it runs is decided by the risk
// rule (risk.go): risk = max(source risk, permission risk) picks the
// runtime (medium and above: runsc, never downgraded), the network mode and
// the secret mode, and a decision above the ceiling is refused rather than
// relabelled. The decision is kept on the instance and returned.
//
// Its files follow its concerns: manager.go (the set of instances, its
// hooks and sweep), instance.go (the types), create.go (a request's
// validation and decision, its own lease), lease.go (the servers a lease
// request starts, all or none: StartOnLease), start.go (bringing a server
// up over stdio or http), supervise.go (restarts, lease renewal, a
// server's end), calls.go (the call log, audit, the egress join, serving
// the endpoint), catalog.go, approvals.go and risk.go.
//
// It reaches sandboxes through control's leases and jobs' background jobs
// only; it never imports a driver, the store or the API.
package servers
