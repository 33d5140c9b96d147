package control

import "genesis.dev/sandbox/internal/imagebuild"

// ImageStatus is the status of a profile's image as both API edges name
// it: present, queued, building (waiting for another build included),
// failed or not_built.
func ImageStatus(present bool, b *imagebuild.Progress) string {
	switch {
	case present:
		return "present"
	case b == nil:
		return "not_built"
	case b.State == imagebuild.StateQueued:
		return "queued"
	case b.State == imagebuild.StateWaiting || b.State == imagebuild.StateBuilding:
		return "building"
	case b.State == imagebuild.StateFailed:
		return "failed"
	default:
		return "not_built"
	}
}
