// Package httpapi serves the HTTP API v1: routing (one file per resource),
// Bearer API-key auth, request ids, body limits, application/problem+json
// errors (status from errdefs' one table), ETag/If-Match, and the
// translation between wire types (package client) and the layers below.
//
// It calls control for the sandbox lifecycle (sandboxes, leases, pools,
// tenants, networks, audit, capabilities) and the workload managers for
// what runs inside a running sandbox: jobs (exec, jobs, sessions,
// contexts), artifacts, files and interactive (terminals). It never
// imports a driver, the store, admission, joblog or the agent packages
// (internal/layering checks this): the types it needs of them are named
// by control (list filters, admission figures), jobs (the job log) and
// files (the file requests and results).
package httpapi
