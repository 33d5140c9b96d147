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
	h := withConsole(api, slog.New(slog.DiscardHandler))
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
		{"/", http.StatusFound, false}, // the service's address opens the console
	} {
		got = ""
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/", nil)
		r.URL.Path = tc.path
		h.ServeHTTP(w, r)
		if w.Code != tc.status || (got == tc.path) != tc.toAPI {
			t.Errorf("%s: %d, API saw %q; want %d, to the API %v", tc.path, w.Code, got, tc.status, tc.toAPI)
		}
		if tc.path == "/" && w.Header().Get("Location") != "/console/" {
			t.Errorf("/ redirects to %q, want /console/", w.Header().Get("Location"))
		}
		if !tc.toAPI && tc.path != "/" && w.Header().Get("Content-Security-Policy") == "" {
			t.Errorf("%s: no CSP", tc.path)
		}
	}
}

// TestRootPostGoesToTheAPI: only GET and HEAD of / are the console's.
func TestRootPostGoesToTheAPI(t *testing.T) {
	t.Parallel()
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	w := httptest.NewRecorder()
	withConsole(api, slog.New(slog.DiscardHandler)).ServeHTTP(w, httptest.NewRequest("POST", "/", nil))
	if w.Code != http.StatusTeapot {
		t.Errorf("POST /: %d, want the API's answer", w.Code)
	}
}
