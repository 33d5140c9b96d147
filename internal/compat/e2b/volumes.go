package e2b

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"

	"genesis.dev/sandbox/internal/compat/shared"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/volumes"
)

// Volumes are the named volumes the SDK's Volume class and a create's
// volumeMounts map onto (volumes.Manager).
type Volumes interface {
	Create(ctx context.Context, tenant, name string, sizeMB int64) (*sandbox.Volume, error)
	List(ctx context.Context, tenant string) ([]*sandbox.Volume, error)
	Delete(ctx context.Context, tenant, name string) error
	// Mounted are the volumes sandbox id of tenant holds.
	Mounted(ctx context.Context, tenant, id string) ([]*sandbox.Volume, error)
	// A volume's files, for the content API (volumecontent.go).
	ListFiles(ctx context.Context, tenant, name, p string, limit int) (*volumes.FileList, error)
	StatFile(ctx context.Context, tenant, name, p string) (*volumes.FileInfo, error)
	OpenFile(ctx context.Context, tenant, name, p string) (*os.File, fs.FileInfo, error)
	WriteFile(ctx context.Context, tenant, name, p, mode string, overwrite bool, body io.Reader) (*volumes.FileWritten, error)
	MakeDir(ctx context.Context, tenant, name, p, mode string, parents bool) (*volumes.FileInfo, error)
	SetAttrs(ctx context.Context, tenant, name, p string, a volumes.Attrs) (*volumes.FileInfo, error)
	CheckAttrs(name string, a volumes.Attrs) error
	DeleteFile(ctx context.Context, tenant, name, p string, recursive bool) error
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
// (/volumecontent/…, volumecontent.go): a token of package tokens for this
// volume, made for the caller's key.
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
	writeJSON(w, http.StatusCreated, volumeAndToken{volumeInfo: volumeInfo{Name: v.Name, VolumeID: v.ID}, Token: a.volumeToken(r.Context(), v.ID)})
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
	writeJSON(w, http.StatusOK, volumeAndToken{volumeInfo: volumeInfo{Name: v.Name, VolumeID: v.ID}, Token: a.volumeToken(r.Context(), v.ID)})
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
