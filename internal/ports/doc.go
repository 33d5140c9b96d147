// Package ports reaches TCP ports inside running sandboxes for callers of
// the service: an HTTP reverse proxy (WebSocket upgrades passed through,
// bodies streamed both ways, nothing buffered), raw TCP carried over a
// WebSocket, and signed, expiring preview links a person can open in a
// browser without an API key.
//
// Every connection goes through the sandbox's agent (a dial on the
// sandbox's own loopback, one HTTP/2 stream per connection), so a sandbox
// with network mode none serves its ports without any route in or out.
// Which ports may be reached is the profile's policy (config.PortPolicy).
//
// Every request it forwards into a sandbox has the service's credentials
// removed first (StripCredentials, one list for every path). Every link it
// signs names the API key it was made with and is refused once that key is
// (Config.KeyLive).
//
// ServePreview serves a request that came to a port's own preview origin:
// the link token from the query (traded for an HttpOnly cookie of that
// origin on a browser's navigation), a header or the cookie, then the port.
//
// It reaches a sandbox only through control's Attach (FromControl adapts
// it to the Sandboxes seam its tests fake). It may import control,
// config, tenant, errdefs, api (a header's name) and the agent client; it
// must not import httpapi, store or driver.
package ports
