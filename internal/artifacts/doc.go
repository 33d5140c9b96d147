// Package artifacts is the host side of job artifacts: a content-addressed
// blob store under the data directory (one file per SHA-256, written
// temp+rename, shared by every artifact with that content), the glob
// language artifact requests use, and MIME detection.
//
// It knows nothing of sandboxes, records or HTTP: it must not import
// control, store or httpapi. Files are read out of a sandbox by the caller,
// through the sandbox's agent; this package only ever sees byte streams.
package artifacts
