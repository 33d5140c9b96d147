// Package console serves the web console: the static front-end built from
// console/ (make build) and embedded in the service binary, with a strict
// Content-Security-Policy and the usual security headers on every answer.
//
// The console is a client of the HTTP API like any other: it holds no
// server-side state and no credentials, and it talks to the API with the
// caller's key in an Authorization header. When the front-end has not been
// built (a fresh clone), a placeholder page says how to build it, so the Go
// build never depends on npm.
//
// It must not import the API (internal/httpapi), control, the store, a
// driver or any workload package: it only serves files.
package console
