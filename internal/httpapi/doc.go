// Package httpapi serves the HTTP API v1: routing, Bearer API-key auth,
// request ids, body limits, application/problem+json errors (status from
// errdefs' one table), ETag/If-Match, and the translation between wire types
// (package client) and the control layer. It calls only control.
package httpapi
