package opensandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/compat/shared"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/files"
)

// fileInfo is a file as the SDK knows it. mode is the octal digits read
// as a number (0644 → 644), as the SDK shows and sends them.
type fileInfo struct {
	Path       string `json:"path"`
	Type       string `json:"type"`
	Size       int64  `json:"size"`
	ModifiedAt string `json:"modified_at"`
	CreatedAt  string `json:"created_at"`
	Owner      string `json:"owner"`
	Group      string `json:"group"`
	Mode       int    `json:"mode"`
}

func infoOf(fi files.FileInfo) fileInfo {
	typ := "other"
	switch fi.Type {
	case "file":
		typ = "file"
	case "dir":
		typ = "directory"
	case "symlink":
		typ = "symlink"
	}
	mode, _ := strconv.Atoi(strings.TrimLeft(fi.Mode, "0"))
	t := fi.ModTime.UTC().Format(time.RFC3339Nano)
	return fileInfo{Path: fi.Path, Type: typ, Size: fi.Size, ModifiedAt: t, CreatedAt: t,
		Owner: strconv.Itoa(fi.UID), Group: strconv.Itoa(fi.GID), Mode: mode}
}

// modeOf turns the SDK's mode (octal digits as a number) into the
// gateway's octal string; 0 is the default.
func modeOf(m int) (string, error) {
	if m == 0 {
		return "", nil
	}
	s := strconv.Itoa(m)
	if _, err := strconv.ParseUint(s, 8, 32); err != nil || m > 7777 {
		return "", errdefs.Invalid("mode %d is not octal permission digits (e.g. 644)", m)
	}
	return "0" + s, nil
}

// queryPaths reads the repeated ?path= of a call.
func queryPaths(r *http.Request) ([]string, error) {
	raw := r.URL.Query()["path"]
	if len(raw) == 0 {
		return nil, errdefs.Invalid("path is required")
	}
	out := make([]string, 0, len(raw))
	for _, p := range raw {
		sp, err := sandboxPath(p)
		if err != nil {
			return nil, err
		}
		out = append(out, sp)
	}
	return out, nil
}

// upload serves POST /files/upload: a multipart body of metadata and file
// parts in pairs (metadata {path, mode, owner, group} first, then its
// file), each written through the gateway, parents made, overwriting.
// owner and group are not supported (files belong to the sandbox's user).
func (a *Adapter) upload(w http.ResponseWriter, r *http.Request) {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		a.writeError(w, r, errdefs.Invalid("the body must be multipart/form-data with metadata and file parts"))
		return
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	var meta *struct {
		Path string `json:"path"`
		Mode int    `json:"mode"`
	}
	written := 0
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			a.writeError(w, r, fmt.Errorf("reading the multipart body: %v: %w", err, errdefs.ErrInvalidArgument))
			return
		}
		switch part.FormName() {
		case "metadata":
			meta = &struct {
				Path string `json:"path"`
				Mode int    `json:"mode"`
			}{}
			b, err := io.ReadAll(io.LimitReader(part, 64<<10))
			if err == nil {
				err = json.Unmarshal(b, meta)
			}
			if err != nil {
				a.writeError(w, r, errdefs.Invalid("a metadata part is not JSON {path, mode}: %v", err))
				return
			}
		case "file":
			if meta == nil {
				a.writeError(w, r, fmt.Errorf("a file part comes before its metadata part: %w", errdefs.ErrInvalidArgument))
				return
			}
			p, err := sandboxPath(meta.Path)
			var mode string
			if err == nil {
				mode, err = modeOf(meta.Mode)
			}
			if err == nil {
				_, err = a.files.WriteFile(r.Context(), files.WriteFileInput{Tenant: tenantOf(r.Context()), SandboxID: sandboxOf(r.Context()),
					Path: p, Mode: mode, Overwrite: true, Size: -1, Body: part})
			}
			if err != nil {
				a.writeError(w, r, err)
				return
			}
			meta = nil
			written++
		}
		part.Close()
	}
	if written == 0 {
		a.writeError(w, r, errdefs.Invalid("no file part in the body"))
		return
	}
	w.WriteHeader(http.StatusOK)
}

// download serves GET /files/download?path=: the file's bytes through the
// gateway (Range and conditional headers pass through).
func (a *Adapter) download(w http.ResponseWriter, r *http.Request) {
	p, err := sandboxPath(r.URL.Query().Get("path"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	shared.ServeFile(w, r, a.files, tenantOf(r.Context()), sandboxOf(r.Context()), p, a.writeError)
}

// fileInfo serves GET /files/info?path=…: each path's info by path.
func (a *Adapter) fileInfo(w http.ResponseWriter, r *http.Request) {
	paths, err := queryPaths(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out := map[string]fileInfo{}
	for i, p := range paths {
		fi, err := a.files.StatFile(r.Context(), tenantOf(r.Context()), sandboxOf(r.Context()), p)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		out[r.URL.Query()["path"][i]] = infoOf(fi)
	}
	writeJSON(w, http.StatusOK, out)
}

// remove deletes each ?path= (recursive for directories).
func (a *Adapter) remove(w http.ResponseWriter, r *http.Request, recursive bool) {
	paths, err := queryPaths(r)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	for _, p := range paths {
		if err := a.files.DeleteFile(r.Context(), tenantOf(r.Context()), sandboxOf(r.Context()), files.DeleteRequest{Path: p, Recursive: recursive}); err != nil {
			a.writeError(w, r, err)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// deleteFiles serves DELETE /files?path=….
func (a *Adapter) deleteFiles(w http.ResponseWriter, r *http.Request) { a.remove(w, r, false) }

// deleteDirectories serves DELETE /directories?path=… (with their contents).
func (a *Adapter) deleteDirectories(w http.ResponseWriter, r *http.Request) { a.remove(w, r, true) }

// makeDirectories serves POST /directories {path: {mode, owner, group}}:
// each made with its parents.
func (a *Adapter) makeDirectories(w http.ResponseWriter, r *http.Request) {
	var body map[string]struct {
		Mode int `json:"mode"`
	}
	if err := shared.DecodeBody(r, &body); err != nil {
		a.writeError(w, r, err)
		return
	}
	for raw, perm := range body {
		p, err := sandboxPath(raw)
		var mode string
		if err == nil {
			mode, err = modeOf(perm.Mode)
		}
		if err == nil {
			_, err = a.files.Mkdir(r.Context(), tenantOf(r.Context()), sandboxOf(r.Context()), files.MkdirRequest{Path: p, Mode: mode})
		}
		if err != nil {
			a.writeError(w, r, err)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// moveFiles serves POST /files/mv [{src, dest}].
func (a *Adapter) moveFiles(w http.ResponseWriter, r *http.Request) {
	var body []struct {
		Src  string `json:"src"`
		Dest string `json:"dest"`
	}
	if err := shared.DecodeBody(r, &body); err != nil {
		a.writeError(w, r, err)
		return
	}
	for _, m := range body {
		from, err := sandboxPath(m.Src)
		var to string
		if err == nil {
			to, err = sandboxPath(m.Dest)
		}
		if err == nil {
			_, err = a.files.MoveFile(r.Context(), tenantOf(r.Context()), sandboxOf(r.Context()), files.MoveRequest{From: from, To: to, Overwrite: true})
		}
		if err != nil {
			a.writeError(w, r, err)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// listDirectory serves GET /directories/list?path=&depth=.
func (a *Adapter) listDirectory(w http.ResponseWriter, r *http.Request) {
	p, err := sandboxPath(r.URL.Query().Get("path"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	depth := 1
	if v := r.URL.Query().Get("depth"); v != "" {
		if depth, err = strconv.Atoi(v); err != nil || depth < 1 || depth > 10 {
			a.writeError(w, r, errdefs.Invalid("depth %q is not 1..10", v))
			return
		}
	}
	list, err := a.files.ListFiles(r.Context(), tenantOf(r.Context()), sandboxOf(r.Context()), p, depth, 0)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out := make([]fileInfo, 0, len(list.Entries))
	for _, e := range list.Entries {
		out = append(out, infoOf(e))
	}
	writeJSON(w, http.StatusOK, out)
}

// searchFiles serves GET /files/search?path=&pattern=: the files below
// path whose names match the glob pattern.
func (a *Adapter) searchFiles(w http.ResponseWriter, r *http.Request) {
	p, err := sandboxPath(r.URL.Query().Get("path"))
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	res, err := a.files.SearchFiles(r.Context(), tenantOf(r.Context()), sandboxOf(r.Context()),
		files.SearchRequest{Path: p, Glob: r.URL.Query().Get("pattern"), MaxResults: 1000})
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out := []fileInfo{}
	for _, m := range res.Matches {
		fi, err := a.files.StatFile(r.Context(), tenantOf(r.Context()), sandboxOf(r.Context()), m.Path)
		if err != nil {
			continue // gone meanwhile
		}
		out = append(out, infoOf(fi))
	}
	writeJSON(w, http.StatusOK, out)
}
