package e2b_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestWithoutVolumes: a service without named volumes answers the SDK's
// Volume calls and a create with volumeMounts 501 and makes no sandbox;
// a create without them works, and its detail shows no mounts.
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
	if code, b := s.call(t, "GET", "/v2/sandboxes", "", nil); code != http.StatusOK || strings.TrimSpace(b) != "[]" {
		t.Errorf("after the refused create: %d %s, want no sandbox", code, b)
	}
	c := s.create(t, `{"templateID":"base","timeout":120}`)
	if code, b := s.call(t, "GET", "/sandboxes/"+c.SandboxID, "", nil); code != http.StatusOK || strings.Contains(b, "volumeMounts") {
		t.Errorf("get: %d %s, want no volumeMounts", code, b)
	}
}
