package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestWithConsole: /console and below go to the console, everything else to
// the API exactly as sent (no path cleaning or redirects on the way).
func TestWithConsole(t *testing.T) {
	t.Parallel()
	var got string
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.URL.Path; w.WriteHeader(http.StatusTeapot) })
	h := withConsole(api, func(r *http.Request) bool { return r.Host == "8000-preview.localhost" }, slog.New(slog.DiscardHandler))
	for _, tc := range []struct {
		path   string
		status int
		toAPI  bool
	}{
		{"/console/", http.StatusOK, false},
		{"/console", http.StatusMovedPermanently, false},
		{"/console/nope.js", http.StatusNotFound, false},
		{"/consoles", http.StatusTeapot, true},
		{"/v1/sandboxes/sbx_1/ports/80//a/../b", http.StatusTeapot, true},
		{"/", http.StatusTeapot, true},
		{"/console/", http.StatusTeapot, true}, // on a preview host: never the console
	} {
		got = ""
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		r.URL.Path = tc.path
		if tc.toAPI && tc.path == "/console/" {
			r.Host = "8000-preview.localhost"
		}
		h.ServeHTTP(w, r)
		if w.Code != tc.status || (got == tc.path) != tc.toAPI {
			t.Errorf("%s: %d, API saw %q; want %d, to the API %v", tc.path, w.Code, got, tc.status, tc.toAPI)
		}
		if !tc.toAPI && w.Header().Get("Content-Security-Policy") == "" {
			t.Errorf("%s: no CSP", tc.path)
		}
	}
}
