package console

import (
	"bytes"
	"html/template"
	"net/http"
	"strings"
	"time"
)

// ViewerPrefix is where the desktop live-view page's scripts and styles
// are served (the page itself is at /v1/displays/{token}/viewer).
const ViewerPrefix = "/viewer/"

// viewerAssets are the files below ViewerPrefix.
var viewerAssets = map[string]bool{"viewer.js": true, "viewer-style.css": true}

// ViewerPage is what the live-view page shows: the sandbox and the role
// of the link it was opened with.
type ViewerPage struct {
	SandboxID string
	Role      string
	ExpiresAt time.Time
}

// Viewer serves the desktop live-view page (noVNC, bundled from npm by
// make build) and its assets.
type Viewer struct {
	h    *Handler
	page *template.Template
}

const viewerPlaceholder = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Live view not built</title></head>` +
	`<body><p>The live-view page was not built into this binary: run <code>make build</code>. ` +
	`The live view's WebSocket works without it ({{.SandboxID}}, {{.Role}}).</p></body></html>`

// NewViewer reads the embedded live-view page.
func NewViewer() *Viewer {
	h := New()
	src := viewerPlaceholder
	if f, ok := h.files["viewer.html"]; ok {
		src = string(f.body)
	}
	return &Viewer{h: h, page: template.Must(template.New("viewer").Parse(src))}
}

// Built reports whether the binary carries the live-view page.
func (v *Viewer) Built() bool {
	_, ok := v.h.files["viewer.html"]
	return ok
}

// securityHeaders are sent with every answer of the console and the
// live-view page: the console's policy (scripts, styles and connections —
// the live view's WebSocket — from the service only), no sniffing, no
// framing, no referrer.
func securityHeaders(w http.ResponseWriter) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", ContentSecurityPolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
	hdr.Set("Cross-Origin-Resource-Policy", "same-origin")
	hdr.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=(), payment=(), usb=()")
}

// ServePage answers the live-view page for p. It is never cached: the
// URL holds the link, which expires.
func (v *Viewer) ServePage(w http.ResponseWriter, r *http.Request, p ViewerPage) {
	securityHeaders(w)
	var buf bytes.Buffer
	if err := v.page.Execute(&buf, p); err != nil {
		http.Error(w, "live-view page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return
	}
	_, _ = w.Write(buf.Bytes())
}

// HasAsset reports whether ViewerPrefix + name is served.
func (v *Viewer) HasAsset(name string) bool {
	_, ok := v.h.files[name]
	return ok && viewerAssets[name]
}

// ServeAsset answers GET ViewerPrefix + name for the page's script and
// style.
func (v *Viewer) ServeAsset(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	name, _ := strings.CutPrefix(r.URL.Path, ViewerPrefix)
	f, ok := v.h.files[name]
	if !ok || !viewerAssets[name] {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", f.ctype)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("ETag", f.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.body))
}
