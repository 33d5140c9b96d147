// Package egress holds the network policy of sandboxes and the pure rules
// that enforce it: the wire policy (modes none, allowlist, internal-api and
// tool-proxy), its validation against the operator's network configuration,
// the always-denied address set, the host-pattern matcher and the decision
// function the egress gateway applies to every DNS lookup and connection.
// It also defines the wire types of the gateway's control API (proto.go).
//
// Everything here is pure: no sockets, no clock, no environment, except
// ReadSecret and HostAddresses, which the service calls to fill a tool
// credential and the deny list before it pushes a sandbox's configuration
// to the gateway.
//
// It imports only the standard library and errdefs; the gateway
// (egress/gateway), its client (egress/egressclient) and the service build on
// it. It must not import driver, control, store or httpapi.
package egress
