// Package agentclient is the host-side client of the in-sandbox
// genesis-agent. It keeps one multiplexed HTTP/2 (cleartext, prior
// knowledge) connection per sandbox over the agent's Unix socket and maps
// failures to errdefs classes.
//
// It imports only the standard library, agentproto and errdefs; it must not
// import the agent implementation or any service layer.
package agentclient
