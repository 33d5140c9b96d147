package agentproto

// PathPortDial is POST: connect to TCP 127.0.0.1:{port} inside the sandbox
// (the sandbox's own loopback, so it works with no network at all) and
// carry the connection over this one request, full duplex:
//
//   - The agent answers 200 (ContentTypeStream) as soon as the connection
//     is made and flushes the headers at once. The request body is written
//     to the connection as it arrives; the end of the request body shuts
//     down the connection's write side (the service reads EOF) while its
//     answer keeps flowing. The response body is what the service sends;
//     it ends when the service closes its side, and the exchange is then
//     over (input sent afterwards is dropped).
//   - A port nobody listens on, or a connection not made within about two
//     seconds, answers 503 with code CodePortUnreachable; a port outside
//     1..65535 answers 400.
const PathPortDial = "/v1/ports/{port}/dial"

// UpgradeRawPort is the Upgrade token of a PathPortDial over HTTP/1.1 that
// asks for the connection itself: with "Connection: Upgrade" and
// "Upgrade: genesis-port" (and no body) the agent answers 101 Switching
// Protocols once the port is connected, and the HTTP connection then
// carries the port's bytes both ways with no framing, as PathPortDial
// describes otherwise (the caller's shutdown of its write side is the end
// of sending; a refused port answers as above, without the upgrade). One
// connection per dial costs a connect, and saves the per-message framing
// and hand-offs of a stream of the shared HTTP/2 connection, which under
// gVisor are most of a small exchange's time (a DevTools session's).
const UpgradeRawPort = "genesis-port"

// PathPorts is the prefix of the port routes.
const PathPorts = "/v1/ports/"

// ContentTypeStream is the type of raw byte streams (a dialled port).
const ContentTypeStream = "application/octet-stream"

// CodePortUnreachable is the problem code of a dial to a port of the
// sandbox's loopback that refused or did not answer in time.
const CodePortUnreachable = "port_unreachable"
