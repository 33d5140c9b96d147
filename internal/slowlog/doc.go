// Package slowlog logs the API requests that took longer than they
// should: one structured warning per slow request, with where its time
// went (the hops the Server-Timing header would give, for the routes that
// have them), and a count per route for the metrics.
//
// It owns the rule of what is slow: longer than the threshold beyond the
// wait the caller asked for (an exec's time limit, a create's
// wait_seconds), and never a long-lived request (a stream, an upgrade,
// traffic to a sandbox's own server). It knows nothing of the API's
// routes or of what fills the hops: the root handler opens a Request per
// request, the handlers note on it what they know, and the root handler
// ends it.
//
// It imports the standard library only.
package slowlog
