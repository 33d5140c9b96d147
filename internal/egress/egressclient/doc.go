// Package egressclient is the service's client of the egress gateway's
// control API: HTTP/1.1 with keep-alive over the gateway's Unix socket.
// Failures map to errdefs classes and keep the gateway's problem code.
//
// It imports only the standard library, egress and errdefs.
package egressclient
