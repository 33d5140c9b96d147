// Package gateway is the egress gateway behind cmd/genesis-egress: one
// process per service instance that every networked sandbox's traffic goes
// through. For each sandbox it serves, on its own address on that sandbox's
// network, DNS (udp+tcp), plain HTTP routed by Host, TLS routed by the SNI of
// the ClientHello (never terminated), an HTTP CONNECT / forward proxy, and
// the tool proxy that injects operator credentials. Every lookup and
// connection is decided by egress.Rules and recorded as an event; upstreams
// are dialled by the address the gateway resolved and checked itself.
//
// The service drives it through the control API on a Unix socket
// (control.go; client in egress/egressclient).
//
// It imports only the standard library, golang.org/x/net/dns/dnsmessage,
// egress and errdefs: it is built into a small static binary and must not
// import the service's control, driver, store or httpapi packages.
package gateway
