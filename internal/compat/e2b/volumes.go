package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"genesis.dev/sandbox/internal/compat/shared"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// Volumes are the named volumes the SDK's Volume class and a create's
// volumeMounts map onto (volumes.Manager).
type Volumes interface {
	Create(ctx context.Context, tenant, name string, sizeMB int64) (*sandbox.Volume, error)
	List(ctx context.Context, tenant string) ([]*sandbox.Volume, error)
	Delete(ctx context.Context, tenant, name string) error
	// Mounted are the volumes sandbox id of tenant holds.
	Mounted(ctx context.Context, tenant, id string) ([]*sandbox.Volume, error)
}

// DefaultVolumeMB is the size of a volume made through the SDK, whose
// create names no size (Volume.create(name)).
const DefaultVolumeMB = 1024

// volumeInfo is a volume as the SDK's list shows it (schema Volume).
type volumeInfo struct {
	Name     string `json:"name"`
	VolumeID string `json:"volumeID"`
}

// volumeAndToken is a volume as create and get answer it (schema
// VolumeAndToken). Token is the credential of E2B's volume content API
// (/volumecontent/…), which this adapter does not serve: it is empty, and
// a volume's files go through a sandbox that mounts it or /v1/volumes.
type volumeAndToken struct {
	volumeInfo
	Token string `json:"token"`
}

// volumeMount is one entry of a create's volumeMounts and of a sandbox's
// detail (schema SandboxVolumeMount): the volume's name and where the
// sandbox sees it, writable.
type volumeMount struct {
	Name string `json:"name"`
	Path string `json:"path"`
}

func volumesUnsupported() error {
	return errdefs.WithCode("volumes_unsupported", fmt.Errorf("this service's backend has no named volumes: %w", errdefs.ErrNotImplemented))
}

// volumeByID finds the caller's volume whose id is id (E2B's 404
// otherwise).
func (a *Adapter) volumeByID(ctx context.Context, tenant, id string) (*sandbox.Volume, error) {
	list, err := a.vols.List(ctx, tenant)
	if err != nil {
		return nil, err
	}
	for _, v := range list {
		if v.ID == id {
			return v, nil
		}
	}
	return nil, errdefs.WithCode("volume_not_found", fmt.Errorf("volume %.80q not found: %w", id, errdefs.ErrNotFound))
}

// withVolumes answers 501 where the service has no named volumes.
func (a *Adapter) withVolumes(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a.vols == nil {
			a.writeError(w, r, volumesUnsupported())
			return
		}
		h(w, r)
	}
}

// createVolume serves POST /volumes {name}: a named volume of
// DefaultVolumeMB (201 VolumeAndToken).
func (a *Adapter) createVolume(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Name string `json:"name"`
	}
	if err := shared.DecodeBody(r, &body); err != nil {
		a.writeError(w, r, err)
		return
	}
	v, err := a.vols.Create(r.Context(), tenantOf(r.Context()), body.Name, DefaultVolumeMB)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, volumeAndToken{volumeInfo: volumeInfo{Name: v.Name, VolumeID: v.ID}})
}

// listVolumes serves GET /volumes: the caller's volumes.
func (a *Adapter) listVolumes(w http.ResponseWriter, r *http.Request) {
	list, err := a.vols.List(r.Context(), tenantOf(r.Context()))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out := make([]volumeInfo, 0, len(list))
	for _, v := range list {
		out = append(out, volumeInfo{Name: v.Name, VolumeID: v.ID})
	}
	writeJSON(w, http.StatusOK, out)
}

// getVolume serves GET /volumes/{volumeID}.
func (a *Adapter) getVolume(w http.ResponseWriter, r *http.Request) {
	v, err := a.volumeByID(r.Context(), tenantOf(r.Context()), r.PathValue("volumeID"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, volumeAndToken{volumeInfo: volumeInfo{Name: v.Name, VolumeID: v.ID}})
}

// deleteVolume serves DELETE /volumes/{volumeID}: 204, 404 for a volume
// the caller has not (the SDK's destroy answers false), 409 volume_in_use
// while a sandbox mounts it.
func (a *Adapter) deleteVolume(w http.ResponseWriter, r *http.Request) {
	tenant := tenantOf(r.Context())
	v, err := a.volumeByID(r.Context(), tenant, r.PathValue("volumeID"))
	if err == nil {
		err = a.vols.Delete(r.Context(), tenant, v.Name)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// volumeRequests maps a create's volumeMounts onto named volumes of the
// caller, mounted writable (E2B's mounts have no read-only form).
func (a *Adapter) volumeRequests(in []volumeMount) ([]sandbox.VolumeRequest, error) {
	if len(in) == 0 {
		return nil, nil
	}
	if a.vols == nil {
		return nil, volumesUnsupported()
	}
	out := make([]sandbox.VolumeRequest, 0, len(in))
	for _, m := range in {
		if m.Name == "" || m.Path == "" {
			return nil, errdefs.WithCode("invalid_volume_mount", errdefs.Mark(fmt.Errorf("a volume mount needs a name and a path"), errdefs.ErrInvalidArgument))
		}
		out = append(out, sandbox.VolumeRequest{Volume: m.Name, Path: m.Path})
	}
	return out, nil
}

// mountsOf are the volumes sandbox id of tenant holds, as its detail
// shows them (none where the service has no volumes).
func (a *Adapter) mountsOf(ctx context.Context, tenant, id string) ([]volumeMount, error) {
	out := []volumeMount{}
	if a.vols == nil {
		return out, nil
	}
	vols, err := a.vols.Mounted(ctx, tenant, id)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return nil, err
	}
	for _, v := range vols {
		if m, ok := v.MountOf(id); ok {
			out = append(out, volumeMount{Name: v.Name, Path: m.Path})
		}
	}
	return out, nil
}

// volumeContentRoute answers every call of E2B's volume content API 501.
// The SDK calls it with the per-volume token create and get answered,
// which is empty, so it sends no credential: such a call is answered at
// once and says nothing of any volume. A call with an API key is
// authenticated first (and so audited as its caller's).
func (a *Adapter) volumeContentRoute(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-API-KEY") != "" || r.Header.Get("Authorization") != "" {
		a.apiKey(a.volumeContent)(w, r)
		return
	}
	a.volumeContent(w, r)
}

// volumeContent is the 501 of E2B's volume content API: a volume's files
// go through a sandbox that mounts it or /v1/volumes/{name}/files.
func (a *Adapter) volumeContent(w http.ResponseWriter, r *http.Request) {
	a.writeError(w, r, errdefs.WithCode("not_supported", errdefs.Mark(fmt.Errorf(
		"E2B's volume content API is not served here: read and write a volume's files in a sandbox that mounts it, or through /v1/volumes/{name}/files"), errdefs.ErrNotImplemented)))
}
