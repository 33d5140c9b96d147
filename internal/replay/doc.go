// Package replay runs the agent's actions recorded in a sandbox's trace
// again on another sandbox of the same profile and compares each with its
// record: whether it succeeded, a job's exit code, and for a computer
// action the screenshot after it (pixel by pixel, within a threshold).
//
// It reaches the trace, the sandboxes, the desktop, the browser, jobs and
// artifacts through small interfaces of its own (replay.go), so that any
// edge (HTTP, gRPC) calls the same replayer and tests can drive it over
// fakes. It imports api (the request and report are the API's shapes),
// trace, jobs, browser (their input and result types), control (a
// sandbox's reservation check), sandbox and errdefs; never an edge, the
// SDK, the store or a driver (internal/layering states the rule).
package replay
