package api

import "time"

// CreateVolumeRequest asks for a named volume of the caller's tenant.
type CreateVolumeRequest struct {
	// Name is 1 to 63 lower-case letters, digits, '-' and '_', starting
	// with a letter or digit; unique within the tenant.
	Name string `json:"name"`
	// SizeMB is the volume's hard size limit in MiB: writing past it
	// fails with ENOSPC inside a sandbox and 413 volume_full here.
	SizeMB int64 `json:"size_mb"`
}

// Volume is a named volume as the API shows it.
type Volume struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	SizeMB int64  `json:"size_mb"`
	// UsedBytes is what the volume's filesystem holds now (statfs, so its
	// own metadata counts: a few MiB on an empty volume); absent when the
	// service does not know it (the volume is not ready, or its filesystem
	// is not mounted on the service's host now).
	UsedBytes *int64 `json:"used_bytes,omitempty"`
	// State is creating, ready or deleting.
	State string `json:"state"`
	// Mounts are the sandboxes that hold the volume now: one writer or
	// any number of readers.
	Mounts    []VolumeHolder `json:"mounts"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"updated_at"`
}

// VolumeHolder is a sandbox that holds a volume.
type VolumeHolder struct {
	SandboxID string `json:"sandbox_id"`
	Path      string `json:"path"`
	ReadOnly  bool   `json:"read_only"`
}

// VolumeList is a tenant's volumes, by name.
type VolumeList struct {
	Items []Volume `json:"items"`
}

// VolumeMount asks for a volume to be mounted into a new sandbox (the
// volumes of a create or lease request).
type VolumeMount struct {
	// Volume is the volume's name.
	Volume string `json:"volume"`
	// Path is where the sandbox sees it: an absolute path strictly below
	// one of the service's volume roots (by default /workspace and /mnt).
	Path string `json:"path"`
	// ReadOnly mounts it read-only: any number of sandboxes may read a
	// volume no sandbox writes.
	ReadOnly bool `json:"read_only,omitempty"`
}
