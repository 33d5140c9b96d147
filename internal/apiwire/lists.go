package apiwire

import (
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
