// Package api holds the wire types of the Genesis Sandbox HTTP API v1: the
// request and answer bodies of its routes, the events of its streams and
// WebSockets, the problem body of its errors, the values of its enumerated
// fields, its headers, and the paths of the routes the SDK builds. The
// OpenAPI document beside this package (openapi.yaml) describes the same
// shapes.
//
// Both ends share it: the service (internal/httpapi and the workload
// packages whose requests and answers are the API's shapes) encodes and
// decodes these types, and the SDK (package client) re-exports them under
// their old names with type aliases.
//
// Import rule: api is a leaf. It imports the standard library only and
// nothing of this module, so anyone may import it; it holds no behaviour
// beyond the JSON encoding of its types.
package api
