// Package artifacts is the host side of job artifacts.
//
// Blobs, globs and MIME detection are pure: a content-addressed blob store
// under the data directory (one file per SHA-256, written temp+rename,
// shared by every artifact with that content), the glob language artifact
// requests use, and MIME detection. They know nothing of sandboxes,
// records or HTTP.
//
// The Keeper builds on them: it records a job's artifact request, reads
// the matching files out of the sandbox when the job ends — through the
// sandbox's agent, reached with control's Attach; never a host path into
// the container — stores them as blobs with their records, serves them,
// and removes expired ones (control's Sweep hook).
//
// It may import control, store (for the artifact records' contract),
// agentclient, agentproto, config, sandbox and errdefs; it must not import
// httpapi, driver or the other workload packages.
package artifacts
