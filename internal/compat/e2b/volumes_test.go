package e2b_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestWithoutVolumes: a service without named volumes answers the SDK's
// Volume calls and a create with volumeMounts 501 and makes no sandbox;
// a create without them works, and its detail shows no mounts. The
// volume content API answers 501 whoever asks.
func TestWithoutVolumes(t *testing.T) {
	t.Parallel()
	s := newE2BServer(t, true)
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/volumes", `{"name":"data"}`},
		{"GET", "/volumes", ``},
		{"GET", "/volumes/vol_x", ``},
		{"DELETE", "/volumes/vol_x", ``},
		{"POST", "/v2/sandboxes", `{"templateID":"base","volumeMounts":[{"name":"data","path":"/mnt/data"}]}`},
	} {
		if code, b := s.call(t, r.method, r.path, r.body, nil); code != http.StatusNotImplemented || !strings.Contains(b, `"code":501`) {
			t.Errorf("%s %s: %d %s, want 501", r.method, r.path, code, b)
		}
	}
	// E2B's volume content API is never served: 501 without a credential
	// (the SDK sends none: create answers its token empty) and with one.
	for _, m := range []string{"GET /file", "PUT /file", "GET /dir", "POST /dir", "GET /path", "PATCH /path", "DELETE /path"} {
		method, tail, _ := strings.Cut(m, " ")
		if code, b := s.send(t, method, "/volumecontent/vol_x"+tail+"?path=a", "", nil, nil); code != http.StatusNotImplemented || !strings.Contains(b, `"code":501`) {
			t.Errorf("%s /volumecontent/vol_x%s: %d %s, want 501", method, tail, code, b)
		}
		if code, b := s.call(t, method, "/volumecontent/vol_x"+tail+"?path=a", "", nil); code != http.StatusNotImplemented {
			t.Errorf("%s /volumecontent/vol_x%s with an API key: %d %s, want 501", method, tail, code, b)
		}
	}
	if code, b := s.call(t, "GET", "/v2/sandboxes", "", nil); code != http.StatusOK || strings.TrimSpace(b) != "[]" {
		t.Errorf("after the refused create: %d %s, want no sandbox", code, b)
	}
	c := s.create(t, `{"templateID":"base","timeout":120}`)
	if code, b := s.call(t, "GET", "/sandboxes/"+c.SandboxID, "", nil); code != http.StatusOK || strings.Contains(b, "volumeMounts") {
		t.Errorf("get: %d %s, want no volumeMounts", code, b)
	}
}
