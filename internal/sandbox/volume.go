package sandbox

import "time"

// VolumeState is the state of a volume record.
type VolumeState string

// Volume states. A volume is creating from its record's insert until its
// filesystem is made; only a ready volume is mounted or written; deleting
// marks one whose files are being removed (nothing may mount it again).
const (
	VolumeCreating VolumeState = "creating"
	VolumeReady    VolumeState = "ready"
	VolumeDeleting VolumeState = "deleting"
)

// Volume is the persistent record of a tenant's named volume: a directory
// with a hard size limit that outlives the sandboxes it is mounted into.
type Volume struct {
	ID     string      `json:"id"`
	Tenant string      `json:"tenant"`
	Name   string      `json:"name"`
	SizeMB int64       `json:"size_mb"`
	State  VolumeState `json:"state"`
	// Mounts are the sandboxes that hold the volume now: one writer or
	// any number of readers.
	Mounts    []VolumeMount `json:"mounts,omitempty"`
	CreatedAt time.Time     `json:"created_at"`
	UpdatedAt time.Time     `json:"updated_at"`
}

// VolumeMount is one sandbox's hold on a volume.
type VolumeMount struct {
	SandboxID string `json:"sandbox_id"`
	// Path is where the sandbox sees the volume.
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only"`
}

// Writer returns the sandbox that holds the volume writable, or "".
func (v *Volume) Writer() string {
	for _, m := range v.Mounts {
		if !m.ReadOnly {
			return m.SandboxID
		}
	}
	return ""
}

// MountOf returns sandbox id's hold on the volume, if it has one.
func (v *Volume) MountOf(id string) (VolumeMount, bool) {
	for _, m := range v.Mounts {
		if m.SandboxID == id {
			return m, true
		}
	}
	return VolumeMount{}, false
}

// VolumeRequest asks for a volume to be mounted into a sandbox.
type VolumeRequest struct {
	// Volume is the volume's name (of the sandbox's tenant).
	Volume   string
	Path     string
	ReadOnly bool
}
