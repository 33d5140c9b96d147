// Package agentclient is the host-side client of the in-sandbox
// genesis-agent. It keeps one multiplexed HTTP/2 (cleartext, prior
// knowledge) connection per sandbox over a connection its Dialer opens (the
// agent's Unix socket for Docker: Dial) and maps failures to errdefs
// classes. Besides calls it carries streams: job output, terminals, job
// stdin (OpenStdin) and TCP connections to ports of the sandbox's own
// loopback (DialPort), each one HTTP/2 stream.
//
// It imports only the standard library, agentproto, errdefs and nofollow
// (the socket is dialled without following what the sandbox put there); it
// must not import the agent implementation or any service layer.
package agentclient
