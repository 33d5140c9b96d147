package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	t.Parallel()
	h := New()
	tests := []struct {
		method, path string
		status       int
		location     string
	}{
		{"GET", "/console/", http.StatusOK, ""},
		{"HEAD", "/console/", http.StatusOK, ""},
		{"GET", "/console/index.html", http.StatusOK, ""},
		{"GET", "/console", http.StatusMovedPermanently, "/console/"},
		{"GET", "/console/no-such-file.js", http.StatusNotFound, ""},
		{"GET", "/console/../etc/passwd", http.StatusNotFound, ""},
		{"POST", "/console/", http.StatusMethodNotAllowed, ""},
		{"DELETE", "/console/index.html", http.StatusMethodNotAllowed, ""},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			t.Parallel()
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
			if w.Code != tc.status || w.Header().Get("Location") != tc.location {
				t.Fatalf("%d Location %q, want %d %q", w.Code, w.Header().Get("Location"), tc.status, tc.location)
			}
			for k, want := range map[string]string{
				"Content-Security-Policy": ContentSecurityPolicy, "X-Content-Type-Options": "nosniff",
				"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer",
			} {
				if got := w.Header().Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

func TestIndexAndRevalidation(t *testing.T) {
	t.Parallel()
	h := New()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/console/", nil))
	body := w.Body.String()
	if !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") || !strings.Contains(body, "<html") {
		t.Fatalf("index: %q %q", w.Header().Get("Content-Type"), body)
	}
	// Built or not, the page never carries inline script: the CSP would refuse it.
	if strings.Contains(body, "<script>") || strings.Contains(body, "onclick=") {
		t.Errorf("index has inline script: %s", body)
	}
	if h.Built() != !strings.Contains(body, "make build") {
		t.Errorf("Built() = %v but the page is %q", h.Built(), body)
	}
	etag := w.Header().Get("ETag")
	r := httptest.NewRequest("GET", "/console/", nil)
	r.Header.Set("If-None-Match", etag)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if etag == "" || w.Code != http.StatusNotModified {
		t.Fatalf("revalidation with ETag %q: %d", etag, w.Code)
	}
}

func TestCSPForbidsInline(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"'unsafe-inline'", "'unsafe-eval'", "*"} {
		if strings.Contains(ContentSecurityPolicy, bad) {
			t.Errorf("CSP allows %s: %s", bad, ContentSecurityPolicy)
		}
	}
}

// TestCSPAllowsBlobVideo: the trace player plays video segments it fetched
// with the key from blob: URLs; without media-src they fall back to
// default-src 'none' and never load.
func TestCSPAllowsBlobVideo(t *testing.T) {
	t.Parallel()
	var media string
	for _, d := range strings.Split(ContentSecurityPolicy, ";") {
		if f := strings.Fields(d); len(f) > 0 && f[0] == "media-src" {
			media = strings.Join(f[1:], " ")
		}
	}
	if media != "'self' blob:" {
		t.Fatalf("media-src is %q, want 'self' blob: (CSP %s)", media, ContentSecurityPolicy)
	}
}
