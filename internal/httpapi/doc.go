// Package httpapi serves the HTTP API v1: routing (one file per resource),
// Bearer API-key auth, request ids, body limits, application/problem+json
// errors (status from errdefs' one table), ETag/If-Match, and the
// translation between wire types (package client) and the layers below.
//
// It calls control for the sandbox lifecycle (sandboxes, leases, pools,
// tenants, networks, audit, capabilities) and the workload managers for
// what runs inside a running sandbox: jobs (exec, jobs, sessions,
// contexts), artifacts, files and interactive (terminals). It never
// imports a driver, the store or admission (internal/layering checks
// this); the list filters and admission figures it needs are named by
// control.
//
// Known leaks, kept for now: job log streaming reads joblog events, and
// the file routes pass agentproto request and result types through.
package httpapi
