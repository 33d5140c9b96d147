// Package opensandbox serves the OpenSandbox SDKs' APIs over the service's
// own application services, so that code written against
// `@alibaba-group/opensandbox` (and the Python `opensandbox`) runs here
// unmodified (docs/compat-opensandbox.md).
//
// It translates, it does not reimplement: a sandbox is control's lease of
// the image's profile (create, renew-expiration and delete are acquire,
// renew and release), commands are jobs' background jobs streamed from
// their durable logs as the SDK's JSON event stream, and files go through
// the file gateway; pause and resume are the snapshots manager's. The
// lifecycle API is under /opensandbox/v1 (the SDK
// appends /v1 to OPEN_SANDBOX_DOMAIN) and authenticated by the service's
// API keys in OPEN-SANDBOX-API-KEY; the execd API of a sandbox is under
// /opensandbox/sandboxes/{id}/execd, the endpoint the lifecycle API
// answers, and authenticated by a per-sandbox token the endpoint's headers
// carry (package tokens).
//
// Import rules (internal/layering): it sits beside httpapi, which mounts
// it. It may import control, jobs, files, snapshots, config, sandbox,
// tenant (the caller's key, which its tokens name), errdefs and
// compat/tokens; it must
// not import httpapi, client, the store, a driver,
// the job log or the agent packages.
package opensandbox
