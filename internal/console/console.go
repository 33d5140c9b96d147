package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

// dist is the front-end build output (console/ → internal/console/dist by
// make build); only dist/.gitkeep is committed.
//
//go:embed all:dist
var dist embed.FS

//go:embed placeholder.html
var placeholder []byte

// Prefix is where the console is served.
const Prefix = "/console/"

// ContentSecurityPolicy is sent with every console answer: scripts, styles
// and connections only from the service itself (no inline script or style),
// images also from blob: and data: URLs (file previews), video from blob:
// URLs (the trace player's segments, fetched with the key), no frames, no
// plugins, no form posts.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; " +
	"media-src 'self' blob:; connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// file is one embedded asset.
type file struct {
	body  []byte
	ctype string
	etag  string
}

// Handler serves the console below Prefix.
type Handler struct {
	files map[string]file
	built bool
}

// New reads the embedded build. Built reports whether it found one.
func New() *Handler {
	h := &Handler{files: map[string]file{}}
	_ = fs.WalkDir(dist, "dist", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		b, err := dist.ReadFile(p)
		if err != nil {
			return err
		}
		h.add(strings.TrimPrefix(p, "dist/"), b)
		return nil
	})
	if _, ok := h.files["index.html"]; ok {
		h.built = true
	} else {
		h.add("index.html", placeholder)
	}
	return h
}

func (h *Handler) add(name string, b []byte) {
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = http.DetectContentType(b)
	}
	sum := sha256.Sum256(b)
	h.files[name] = file{body: b, ctype: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
}

// Built reports whether the binary carries the front-end (false: the
// placeholder page is served).
func (h *Handler) Built() bool { return h.built }

// ServeHTTP answers GET and HEAD below Prefix; "/console" redirects to it.
// Views are addressed by the URL fragment (#/sandboxes/ID), so every page
// load fetches index.html.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	hdr := w.Header()
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, Prefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if name == "" {
		name = "index.html"
	}
	f, ok := h.files[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	hdr.Set("Content-Type", f.ctype)
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("ETag", f.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
}
