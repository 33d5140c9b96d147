package apiwire

import (
	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/volumes"
)

// VolumesCapability is the named volumes part of GET /v1/capabilities;
// m is nil where the service has no volumes (sandboxes on another
// backend).
func VolumesCapability(m *volumes.Manager) api.VolumesCapability {
	if m == nil {
		return api.VolumesCapability{Reason: "this service's backend has no named volumes (they live on the host of sandboxes run by Docker)", Roots: []string{}}
	}
	ok, why := m.Available()
	l := m.Limits()
	out := api.VolumesCapability{Supported: ok, Roots: m.Roots(), MaxSizeMB: l.MaxSizeMB, MaxMBPerTenant: l.MaxMBPerTenant, MaxPerTenant: l.MaxPerTenant}
	if !ok {
		out.Reason = why
	}
	if out.Roots == nil {
		out.Roots = []string{}
	}
	return out
}
