// Package policy decides which runtime a sandbox runs under. The decision is
// a pure function of the request, the profile, the tenant policy and the
// runtimes the capability probe found healthy; it never downgrades isolation
// silently. It imports only sandbox and errdefs.
package policy
