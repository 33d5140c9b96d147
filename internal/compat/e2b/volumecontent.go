package e2b

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/compat/shared"
	"genesis.dev/sandbox/internal/compat/tokens"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/volumes"
)

// E2B's volume content API (the SDK's vol.list, makeDir, getInfo, exists,
// updateMetadata, readFile, writeFile and remove), served on a named
// volume's files (volumes.Manager): the SDK sends it to
// E2B_VOLUME_API_URL with "Authorization: Bearer <token>", the token that
// Volume.create and Volume.getInfo/connect answered, which names the
// volume, its tenant and the API key that asked (so it opens that one
// volume only, and ends with the volume and with the key). An API key in
// X-API-KEY is accepted too.

// volumeTokenScope is what a volume's token names in place of a sandbox:
// a volume's token never opens a sandbox, nor a sandbox's a volume.
func volumeTokenScope(volumeID string) string { return "volume:" + volumeID }

// volumeToken is the content API token of volume id for the caller's key.
func (a *Adapter) volumeToken(ctx context.Context, id string) string {
	p := principalOf(ctx)
	return a.tokens.Sign(tokens.Claims{Tenant: p.Tenant, SandboxID: volumeTokenScope(id), KeyID: p.KeyID, KeyTenant: p.KeyTenant})
}

// Limits of the content API.
const (
	// maxListDepth bounds the depth of a listing; maxListEntries the
	// entries it answers in all.
	maxListDepth   = 8
	maxListEntries = volumes.MaxListLimit
)

// volumeEntry is a file as the content API shows it (schema
// VolumeEntryStat).
type volumeEntry struct {
	Name   string    `json:"name"`
	Type   string    `json:"type"`
	Path   string    `json:"path"`
	Size   int64     `json:"size"`
	Mode   uint32    `json:"mode"`
	UID    int       `json:"uid"`
	GID    int       `json:"gid"`
	ATime  time.Time `json:"atime"`
	MTime  time.Time `json:"mtime"`
	CTime  time.Time `json:"ctime"`
	Target string    `json:"target,omitempty"`
}

func entryOf(fi *volumes.FileInfo) volumeEntry {
	mode, _ := strconv.ParseUint(fi.Mode, 8, 32)
	t := "unknown"
	switch fi.Type {
	case "file":
		t = "file"
	case "dir":
		t = "directory"
	case "symlink":
		t = "symlink"
	}
	return volumeEntry{Name: fi.Name, Type: t, Path: fi.Path, Size: fi.Size, Mode: uint32(mode), UID: fi.UID, GID: fi.GID,
		ATime: fi.AccessTime, MTime: fi.ModTime, CTime: fi.ChangeTime, Target: fi.LinkTarget}
}

// volumeContent authenticates a content API call and answers the name of
// the volume it is for and its tenant. A call without a valid credential
// is 401 whatever the volume; a volume the caller does not have is 404,
// as for one nobody has.
func (a *Adapter) volumeContent(h func(w http.ResponseWriter, r *http.Request, tenant, name string)) http.HandlerFunc {
	return a.withVolumes(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("volumeID")
		serve := func(w http.ResponseWriter, r *http.Request) {
			v, err := a.volumeByID(r.Context(), tenantOf(r.Context()), id)
			if err != nil {
				a.writeError(w, r, err)
				return
			}
			h(w, r, v.Tenant, v.Name)
		}
		token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if r.Header.Get("X-API-KEY") != "" || (token != "" && !strings.HasPrefix(token, "gst_")) {
			a.apiKey(serve)(w, r)
			return
		}
		c, err := a.tokens.Check(token, volumeTokenScope(id))
		if err != nil {
			a.writeError(w, r, fmt.Errorf("missing or wrong volume token for volume %.80q (Volume.connect answers one): %w", id, errdefs.ErrUnauthenticated))
			return
		}
		if err := a.keyLive(r.Context(), c.IssuerTenant(), c.KeyID); err != nil {
			a.writeError(w, r, err)
			return
		}
		serve(w, r.WithContext(context.WithValue(r.Context(), tenantKey, c.Tenant)))
	})
}

// contentPath is the path= of a content call (required).
func contentPath(r *http.Request) (string, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		return "", errdefs.WithCode("invalid_path", errdefs.Invalid("the path query parameter is required"))
	}
	return p, nil
}

// queryMode reads a mode given as a number (E2B's uint32: 420 is 0644)
// into octal permission bits; "" when absent.
func queryMode(r *http.Request) (string, error) {
	s := r.URL.Query().Get("mode")
	if s == "" {
		return "", nil
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n > 0o777 {
		return "", errdefs.WithCode("invalid_mode", fmt.Errorf("mode %.20q: permission bits, 0 to 511 (0777): %w", s, errdefs.ErrInvalidArgument))
	}
	return fmt.Sprintf("%04o", n), nil
}

// queryIDs reads uid= and gid= (nil when absent).
func queryIDs(r *http.Request) (uid, gid *int, err error) {
	read := func(k string) (*int, error) {
		s := r.URL.Query().Get(k)
		if s == "" {
			return nil, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, errdefs.WithCode("invalid_owner", errdefs.Invalid("%s %.20q is not a number", k, s))
		}
		return &n, nil
	}
	if uid, err = read("uid"); err != nil {
		return nil, nil, err
	}
	gid, err = read("gid")
	return uid, gid, err
}

// volumeList serves GET /volumecontent/{id}/dir?path=&depth=: the entries
// below a directory, depth levels deep (default 1, at most maxListDepth),
// at most maxListEntries in all.
func (a *Adapter) volumeList(w http.ResponseWriter, r *http.Request, tenant, name string) {
	p, err := contentPath(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	depth := 1
	if s := r.URL.Query().Get("depth"); s != "" {
		if depth, err = strconv.Atoi(s); err != nil || depth < 1 || depth > maxListDepth {
			a.writeError(w, r, fmt.Errorf("depth %.20q: 1 to %d: %w", s, maxListDepth, errdefs.ErrInvalidArgument))
			return
		}
	}
	out := []volumeEntry{}
	var walk func(dir string, level int) error
	walk = func(dir string, level int) error {
		l, err := a.vols.ListFiles(r.Context(), tenant, name, dir, maxListEntries-len(out))
		if err != nil {
			return err
		}
		for i := range l.Entries {
			e := &l.Entries[i]
			out = append(out, entryOf(e))
			if e.Type == "dir" && level < depth && len(out) < maxListEntries {
				if err := walk(path.Join(l.Path, e.Name), level+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(p, 1); err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// volumeMakeDir serves POST /volumecontent/{id}/dir?path=&mode=&uid=&gid=&force=:
// force makes missing parents and accepts a directory that exists.
func (a *Adapter) volumeMakeDir(w http.ResponseWriter, r *http.Request, tenant, name string) {
	p, err := contentPath(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	mode, err := queryMode(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	uid, gid, err := queryIDs(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	force := r.URL.Query().Get("force") == "true"
	fi, err := a.vols.MakeDir(r.Context(), tenant, name, p, mode, force)
	if err == nil && (uid != nil || gid != nil) {
		fi, err = a.vols.SetAttrs(r.Context(), tenant, name, p, volumes.Attrs{UID: uid, GID: gid})
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, entryOf(fi))
}

// volumeStat serves GET /volumecontent/{id}/path?path=.
func (a *Adapter) volumeStat(w http.ResponseWriter, r *http.Request, tenant, name string) {
	p, err := contentPath(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	fi, err := a.vols.StatFile(r.Context(), tenant, name, p)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, entryOf(fi))
}

// volumeSetMetadata serves PATCH /volumecontent/{id}/path?path= {uid, gid, mode}.
func (a *Adapter) volumeSetMetadata(w http.ResponseWriter, r *http.Request, tenant, name string) {
	p, err := contentPath(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	var body struct {
		UID  *int    `json:"uid"`
		GID  *int    `json:"gid"`
		Mode *uint32 `json:"mode"`
	}
	if err := shared.DecodeBody(r, &body); err != nil {
		a.writeError(w, r, err)
		return
	}
	attrs := volumes.Attrs{UID: body.UID, GID: body.GID}
	if body.Mode != nil {
		if *body.Mode > 0o777 {
			a.writeError(w, r, errdefs.WithCode("invalid_mode", fmt.Errorf("mode %d: permission bits, 0 to 511 (0777): %w", *body.Mode, errdefs.ErrInvalidArgument)))
			return
		}
		m := fmt.Sprintf("%04o", *body.Mode)
		attrs.Mode = &m
	}
	fi, err := a.vols.SetAttrs(r.Context(), tenant, name, p, attrs)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, entryOf(fi))
}

// volumeReadFile serves GET /volumecontent/{id}/file?path=: the content
// (Range works).
func (a *Adapter) volumeReadFile(w http.ResponseWriter, r *http.Request, tenant, name string) {
	p, err := contentPath(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	f, fi, err := a.vols.OpenFile(r.Context(), tenant, name, p)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

// volumeWriteFile serves PUT /volumecontent/{id}/file?path=&mode=&uid=&gid=:
// the body becomes the file (made with its parents, replaced whole if it
// exists; past the volume's size 413 and no partial file).
func (a *Adapter) volumeWriteFile(w http.ResponseWriter, r *http.Request, tenant, name string) {
	p, err := contentPath(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	mode, err := queryMode(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	uid, gid, err := queryIDs(r)
	if err == nil {
		// Owners that would be refused after the write refuse it first.
		err = a.vols.CheckAttrs(name, volumes.Attrs{UID: uid, GID: gid})
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if _, err := a.vols.WriteFile(r.Context(), tenant, name, p, mode, true, r.Body); err != nil {
		a.writeError(w, r, err)
		return
	}
	var fi *volumes.FileInfo
	if uid != nil || gid != nil {
		fi, err = a.vols.SetAttrs(r.Context(), tenant, name, p, volumes.Attrs{UID: uid, GID: gid})
	} else {
		fi, err = a.vols.StatFile(r.Context(), tenant, name, p)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, entryOf(fi))
}

// volumeRemove serves DELETE /volumecontent/{id}/path?path=: a file, or a
// directory with everything in it.
func (a *Adapter) volumeRemove(w http.ResponseWriter, r *http.Request, tenant, name string) {
	p, err := contentPath(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if err := a.vols.DeleteFile(r.Context(), tenant, name, p, true); err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
