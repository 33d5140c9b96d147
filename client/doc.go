// Package client is the public Go SDK of the Genesis Sandbox HTTP API v1.
// The genesis CLI is built on it.
//
// The wire types (request and answer bodies, their enumerated values) are
// declared in package api; client re-exports them under the same names
// with type aliases (client.Sandbox is api.Sandbox) and holds the calls.
// It imports api and nothing from internal/; its only other dependencies
// are a WebSocket library and a vector base64 decoder (with the CPU
// feature check that picks it).
package client
