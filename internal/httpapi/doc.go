// Package httpapi serves the HTTP API v1: routing (one file per resource),
// Bearer API-key auth (through auth), request ids, body limits,
// application/problem+json errors (status from errdefs' one table),
// ETag/If-Match, the audit middleware and the /metrics route. A handler
// decodes api wire types, calls the part that owns the operation and
// encodes its answer, converted by apiwire; application logic lives below
// it (replay, trace export, metrics, tickets, the terminal's and the
// previews' protocols), where another edge can call it too.
//
// It calls control for the sandbox lifecycle (sandboxes, leases, pools,
// networks, capabilities), tenancy for tenants, keys and the audit log,
// and the workload managers for what runs inside a running sandbox. It
// never imports a driver, the store, admission, joblog or the agent
// packages, nor the SDK (internal/layering checks this): the types it
// needs of them are named by control (list filters, admission figures),
// jobs (the job log) and files (the file requests and results).
package httpapi
