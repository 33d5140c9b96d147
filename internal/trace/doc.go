// Package trace keeps the operation trace of each sandbox: one append-only
// log of events (browser and desktop actions, jobs, tool calls, the
// caller's annotations and task status, interrupts), each with a dense,
// monotonic seq that is also the resume cursor of a reader.
//
// A trace is a file per sandbox under the service's data directory
// (<dir>/<sandbox>.jsonl, one JSON event a line) with a small metadata file
// (<sandbox>.meta.json: the tenant and, once the sandbox has ended, when).
// A file per sandbox rather than a store row per event: events are written
// far more often than sandboxes change, are read in order only, and must
// outlive the sandbox's record; the tenant in the metadata keeps reads
// tenant-scoped after the record is gone. A torn last line left by a crash
// is cut off when the log is opened.
//
// Producers record through the Recorder interface declared here, with the
// event kinds named in kind.go; Export writes a trace with the artifacts it
// names as a tar.gz (with a manifest of api's TraceManifest shape and an
// offline player). trace imports nothing of the project but errdefs and
// api (itself a leaf), so any workload package may depend on it without
// an upward import. It must import only errdefs, api and the standard
// library (internal/layering states the rule).
package trace
