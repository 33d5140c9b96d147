package apiwire

import (
	"net/url"
	"strconv"
	"strings"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/snapshots"
)

// The list answers of the HTTP API: Items is never null.

// ProfileList is the answer of GET /v1/profiles.
func ProfileList(views []control.ProfileView) api.ProfileList {
	return api.ProfileList{Items: each(views, Profile)}
}

// SandboxList is the answer of GET /v1/sandboxes.
func SandboxList(list []*sandbox.Sandbox) api.SandboxList {
	return api.SandboxList{Items: each(list, Sandbox)}
}

// JobList is the answer of GET /v1/sandboxes/{id}/jobs.
func JobList(list []*sandbox.Job) api.JobList { return api.JobList{Items: each(list, Job)} }

// LeaseList is the answer of GET /v1/leases.
func LeaseList(list []*sandbox.Lease) api.LeaseList { return api.LeaseList{Items: each(list, Lease)} }

// SnapshotList is the answer of GET /v1/snapshots and of a sandbox's.
func SnapshotList(list []*sandbox.Snapshot) api.SnapshotList {
	return api.SnapshotList{Items: each(list, Snapshot)}
}

// ForkResult is the answer of POST /v1/sandboxes/{id}/fork: the children
// made, and a problem's code and detail for each one that failed.
func ForkResult(res []*snapshots.Made) api.ForkResult {
	out := api.ForkResult{Sandboxes: []api.Sandbox{}}
	for _, c := range res {
		if c.Err != nil {
			out.Errors = append(out.Errors, api.ForkError{Code: errdefs.Code(c.Err), Detail: errdefs.Detail(c.Err)})
			continue
		}
		out.Sandboxes = append(out.Sandboxes, Made(c))
	}
	return out
}

// each converts every element of list with conv.
func each[T, W any](list []T, conv func(T) W) []W {
	out := make([]W, len(list))
	for i, v := range list {
		out[i] = conv(v)
	}
	return out
}

// SandboxFilter reads the query of GET /v1/sandboxes (profile, state —
// repeated or comma-separated —, metadata=key=value repeated) for the
// sandboxes of scope (control.ListScope).
func SandboxFilter(scope string, q url.Values) (control.SandboxFilter, error) {
	f := control.SandboxFilter{Tenant: scope, Profile: q.Get("profile")}
	for _, st := range q["state"] {
		for _, one := range strings.Split(st, ",") {
			f.States = append(f.States, sandbox.State(one))
		}
	}
	for _, kv := range q["metadata"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return f, errdefs.Invalid("metadata filter %q must be key=value", kv)
		}
		if f.Metadata == nil {
			f.Metadata = map[string]string{}
		}
		f.Metadata[k] = v
	}
	return f, nil
}

// JobFilter reads the query of GET /v1/sandboxes/{id}/jobs: the states
// (repeated or comma-separated) and the limit (0: the service's default).
func JobFilter(q url.Values) (states []sandbox.JobState, limit int, err error) {
	for _, st := range q["state"] {
		for _, one := range strings.Split(st, ",") {
			states = append(states, sandbox.JobState(one))
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil {
			return nil, 0, errdefs.Invalid("limit %q is not a number", v)
		}
	}
	return states, limit, nil
}
