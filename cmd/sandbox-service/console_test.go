package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestWithConsole: /console and below go to the console, GET / redirects
// to it, everything else goes to the API exactly as sent (no path cleaning
// or redirects on the way; POST / is the API's 404 or 405).
func TestWithConsole(t *testing.T) {
	t.Parallel()
	var got string
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.URL.Path; w.WriteHeader(http.StatusTeapot) })
	h := withConsole(api, func(r *http.Request) bool { return r.Host == "8000-preview.localhost" }, slog.New(slog.DiscardHandler))
	for _, tc := range []struct {
		path    string
		preview bool // asked on a preview host
		status  int
		toAPI   bool
	}{
		{"/console/", false, http.StatusOK, false},
		{"/console", false, http.StatusMovedPermanently, false},
		{"/console/nope.js", false, http.StatusNotFound, false},
		{"/consoles", false, http.StatusTeapot, true},
		{"/v1/sandboxes/sbx_1/ports/80//a/../b", false, http.StatusTeapot, true},
		{"/", false, http.StatusFound, false},        // the service's address opens the console
		{"/", true, http.StatusTeapot, true},         // a preview's root is the sandbox's
		{"/console/", true, http.StatusTeapot, true}, // on a preview host: never the console
	} {
		got = ""
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		r.URL.Path = tc.path
		if tc.preview {
			r.Host = "8000-preview.localhost"
		}
		h.ServeHTTP(w, r)
		if w.Code != tc.status || (got == tc.path) != tc.toAPI {
			t.Errorf("%s (preview %v): %d, API saw %q; want %d, to the API %v", tc.path, tc.preview, w.Code, got, tc.status, tc.toAPI)
		}
		if tc.status == http.StatusFound && w.Header().Get("Location") != "/console/" {
			t.Errorf("/ redirects to %q, want /console/", w.Header().Get("Location"))
		}
		if !tc.toAPI && tc.status != http.StatusFound && w.Header().Get("Content-Security-Policy") == "" {
			t.Errorf("%s: no CSP", tc.path)
		}
	}
}

// TestRootPostGoesToTheAPI: only GET and HEAD of / are the console's.
func TestRootPostGoesToTheAPI(t *testing.T) {
	t.Parallel()
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	w := httptest.NewRecorder()
	withConsole(api, func(*http.Request) bool { return false }, slog.New(slog.DiscardHandler)).ServeHTTP(w, httptest.NewRequest("POST", "/", nil))
	if w.Code != http.StatusTeapot {
		t.Errorf("POST /: %d, want the API's answer", w.Code)
	}
}
