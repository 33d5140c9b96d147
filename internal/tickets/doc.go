// Package tickets keeps one-use, short-lived tickets that open one
// sandbox's terminal WebSocket for a browser, which cannot set an
// Authorization header on a WebSocket: minting (with per-tenant and
// service-wide caps, the largest holder giving way), and redeeming once.
// A ticket remembers the hash of the key that asked for it, so the edge
// checks that key again when the ticket is used.
//
// It is a leaf: errdefs and the standard library only (internal/layering
// states the rule).
package tickets
