package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/volumes"
)

// Routes of named volumes (docs/volumes.md):
//
//	POST   /v1/volumes                      {name, size_mb} → 201 volume
//	GET    /v1/volumes                      the tenant's volumes
//	GET    /v1/volumes/{name}               one volume
//	DELETE /v1/volumes/{name}               204; 409 volume_in_use while mounted
//	PUT    /v1/volumes/{name}/files?path=   raw body → 201 written
//	GET    /v1/volumes/{name}/files?path=   the content (Range, If-Range)
//	GET    /v1/volumes/{name}/files/stat?path=
//	GET    /v1/volumes/{name}/files/list?path=&limit=
//	POST   /v1/volumes/{name}/files/delete  {path, recursive} → 204
//
// Mounts are asked for in the volumes of POST /v1/sandboxes and
// POST /v1/leases. Where the service has no volumes (sandboxes on other
// hosts) every route answers 501 volumes_unsupported.
func (s *Server) volumeRoutes() {
	h := map[string]func(http.ResponseWriter, *http.Request){
		"POST /v1/volumes":                     s.createVolume,
		"GET /v1/volumes":                      s.listVolumes,
		"GET /v1/volumes/{name}":               s.getVolume,
		"DELETE /v1/volumes/{name}":            s.deleteVolume,
		"PUT /v1/volumes/{name}/files":         s.putVolumeFile,
		"GET /v1/volumes/{name}/files":         s.getVolumeFile,
		"GET /v1/volumes/{name}/files/stat":    s.statVolumeFile,
		"GET /v1/volumes/{name}/files/list":    s.listVolumeFiles,
		"POST /v1/volumes/{name}/files/delete": s.deleteVolumeFile,
	}
	for _, route := range []string{"POST /v1/volumes", "GET /v1/volumes", "GET /v1/volumes/{name}", "DELETE /v1/volumes/{name}",
		"PUT /v1/volumes/{name}/files", "GET /v1/volumes/{name}/files", "GET /v1/volumes/{name}/files/stat",
		"GET /v1/volumes/{name}/files/list", "POST /v1/volumes/{name}/files/delete"} {
		method, pattern, _ := strings.Cut(route, " ")
		fn := h[route]
		if s.vols == nil {
			fn = s.volumesUnsupported
		}
		s.handle(method, pattern, true, fn)
	}
}

func (s *Server) volumesUnsupported(w http.ResponseWriter, r *http.Request) {
	s.writeProblem(w, r, errdefs.WithCode("volumes_unsupported", fmt.Errorf(
		"this service's backend has no named volumes (they live on the host of sandboxes run by Docker): %w", errdefs.ErrNotImplemented)))
}

// volume is v as the API shows it, with the bytes its filesystem holds
// when they are known.
func (s *Server) volume(v *sandbox.Volume) api.Volume {
	out := apiwire.Volume(v)
	if used, ok := s.vols.UsedBytes(v); ok {
		out.UsedBytes = &used
	}
	return out
}

func (s *Server) createVolume(w http.ResponseWriter, r *http.Request) {
	var req api.CreateVolumeRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	v, err := s.vols.Create(r.Context(), tenantOf(r), req.Name, req.SizeMB)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/volumes/"+url.PathEscape(v.Name))
	writeJSON(w, http.StatusCreated, s.volume(v))
}

func (s *Server) listVolumes(w http.ResponseWriter, r *http.Request) {
	list, err := s.vols.List(r.Context(), tenantOf(r))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := api.VolumeList{Items: make([]api.Volume, len(list))}
	for i, v := range list {
		out.Items[i] = s.volume(v)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getVolume(w http.ResponseWriter, r *http.Request) {
	v, err := s.vols.Get(r.Context(), tenantOf(r), r.PathValue("name"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.volume(v))
}

func (s *Server) deleteVolume(w http.ResponseWriter, r *http.Request) {
	if err := s.vols.Delete(r.Context(), tenantOf(r), r.PathValue("name")); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// putVolumeFile serves PUT /v1/volumes/{name}/files?path=&mode=&overwrite=:
// the raw body becomes the file, whole or not at all.
func (s *Server) putVolumeFile(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	overwrite, err := putQuery(r, "")
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	res, err := s.vols.WriteFile(r.Context(), tenantOf(r), r.PathValue("name"), q.Get("path"), q.Get("mode"), overwrite, r.Body)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/volumes/"+url.PathEscape(r.PathValue("name"))+"/files?"+url.Values{"path": {res.Path}}.Encode())
	writeJSON(w, http.StatusCreated, api.FileWritten(*res))
}

// getVolumeFile serves GET (and HEAD) /v1/volumes/{name}/files?path=: the
// content as an attachment (never rendered on the API's origin), with
// Range (206, 416), If-Range and If-None-Match against its ETag.
func (s *Server) getVolumeFile(w http.ResponseWriter, r *http.Request) {
	f, fi, err := s.vols.OpenFile(r.Context(), tenantOf(r), r.PathValue("name"), r.URL.Query().Get("path"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	defer f.Close()
	h := w.Header()
	h.Set("ETag", `"`+strconv.FormatInt(fi.ModTime().UnixNano(), 36)+"-"+strconv.FormatInt(fi.Size(), 36)+`"`)
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", "attachment")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "private, max-age=0")
	http.ServeContent(&rangeProblemWriter{ResponseWriter: w, s: s, r: r, size: fi.Size()}, r, "", fi.ModTime(), f)
}

// volumeFileInfo is a volume's file as the API shows it.
func volumeFileInfo(fi volumes.FileInfo) api.FileInfo {
	return api.FileInfo{Path: fi.Path, Name: fi.Name, Type: fi.Type, Size: fi.Size, Mode: fi.Mode, ModTime: fi.ModTime,
		UID: fi.UID, GID: fi.GID, LinkTarget: fi.LinkTarget, NameInvalidUTF8: fi.NameInvalidUTF8}
}

func (s *Server) statVolumeFile(w http.ResponseWriter, r *http.Request) {
	info, err := s.vols.StatFile(r.Context(), tenantOf(r), r.PathValue("name"), r.URL.Query().Get("path"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, volumeFileInfo(*info))
}

func (s *Server) listVolumeFiles(w http.ResponseWriter, r *http.Request) {
	limit, err := positiveQuery(r, "limit")
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	list, err := s.vols.ListFiles(r.Context(), tenantOf(r), r.PathValue("name"), r.URL.Query().Get("path"), limit)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := api.FileList{Path: list.Path, Truncated: list.Truncated, Entries: make([]api.FileInfo, len(list.Entries))}
	for i, e := range list.Entries {
		out.Entries[i] = volumeFileInfo(e)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteVolumeFile(w http.ResponseWriter, r *http.Request) {
	var b api.DeleteFileRequest
	if err := s.decode(w, r, &b); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if err := s.vols.DeleteFile(r.Context(), tenantOf(r), r.PathValue("name"), b.Path, b.Recursive); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
