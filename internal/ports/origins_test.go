package ports

import (
	"net/http"
	"strings"
	"testing"
)

func TestParseOrigins(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in     string
		ok     bool
		url    string // of sbx_0123456789abcdef:8000
		domain string
	}{
		{"http://*.localhost:8080", true, "http://8000-0123456789abcdef.localhost:8080", "localhost:8080"},
		{"https://*.Preview.Example.NET", true, "https://8000-0123456789abcdef.preview.example.net", "preview.example.net"},
		{"http://*.localhost/", true, "http://8000-0123456789abcdef.localhost", "localhost"},
		{"http://localhost:8080", false, "", ""},
		{"http://*.*.localhost", false, "", ""},
		{"ftp://*.localhost", false, "", ""},
		{"http://*.localhost/x", false, "", ""},
		{"http://*.localhost?a=1", false, "", ""},
		{"http://u@*.localhost", false, "", ""},
		{"http://*.local_host", false, "", ""},
		{"http://*.localhost:0", false, "", ""},
		{"http://*.", false, "", ""},
	} {
		o, err := ParseOrigins(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("%q: err %v, want ok %v", tc.in, err, tc.ok)
			continue
		}
		if err != nil {
			continue
		}
		if got := o.URL("sbx_0123456789abcdef", 8000); got != tc.url {
			t.Errorf("%q: URL %q, want %q", tc.in, got, tc.url)
		}
		if got := o.Domain(); got != tc.domain {
			t.Errorf("%q: Domain %q, want %q", tc.in, got, tc.domain)
		}
	}
}

func TestOriginsMatch(t *testing.T) {
	t.Parallel()
	o, err := ParseOrigins("http://*.localhost:8080")
	if err != nil {
		t.Fatal(err)
	}
	const id = "sbx_0123456789abcdef"
	for _, tc := range []struct {
		host string
		port int
		ok   bool
	}{
		{"8000-0123456789abcdef.localhost:8080", 8000, true},
		{"8000-0123456789ABCDEF.LOCALHOST", 8000, true},          // any case, any port
		{"8000-sbx_0123456789abcdef.localhost:8080", 8000, true}, // E2B's getHost form
		{"1-0123456789abcdef.localhost", 1, true},
		{"localhost:8080", 0, false},
		{"127.0.0.1:8080", 0, false},
		{"0123456789abcdef.localhost", 0, false},
		{"08000-0123456789abcdef.localhost", 0, false},
		{"65536-0123456789abcdef.localhost", 0, false},
		{"0-0123456789abcdef.localhost", 0, false},
		{"8000-0123456789abcdef.x.localhost", 0, false},
		{"8000-0123456789abcdei.localhost", 0, false}, // not base32 of ids (no i)
		{"8000-0123456789abcde.localhost", 0, false},  // too short
		{"8000-job_0123456789abcdef.localhost", 0, false},
		{"8000-0123456789abcdef.localhost.evil.com", 0, false},
		{"8000-0123456789abcdef.notlocalhost", 0, false},
	} {
		gotID, p, ok := o.Match(tc.host)
		if ok != tc.ok || (ok && (gotID != id || p != tc.port)) {
			t.Errorf("Match(%q) = %q %d %v, want %v %d", tc.host, gotID, p, ok, tc.ok, tc.port)
		}
	}
}

// FuzzOriginsMatch: whatever host comes in, a match names a valid sandbox
// id and port, and building the host back gives a host that matches the
// same way.
func FuzzOriginsMatch(f *testing.F) {
	for _, s := range []string{"8000-0123456789abcdef.localhost:8080", "8000-sbx_0123456789abcdef.localhost", "localhost", "a.b.c", "-.localhost"} {
		f.Add(s)
	}
	o, err := ParseOrigins("http://*.localhost:8080")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, host string) {
		id, port, ok := o.Match(host)
		if !ok {
			return
		}
		if port < 1 || port > 65535 || !strings.HasPrefix(id, "sbx_") {
			t.Fatalf("Match(%q) = %q %d", host, id, port)
		}
		id2, port2, ok2 := o.Match(o.Host(id, port))
		if !ok2 || id2 != id || port2 != port {
			t.Fatalf("round trip of %q: %q %d %v", host, id2, port2, ok2)
		}
	})
}

func TestGuardAPIOrigin(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("Service-Worker-Allowed", "/")
	h.Set("Clear-Site-Data", `"*"`)
	h.Set("Content-Security-Policy", "default-src *")
	guardAPIOrigin(h)
	if h.Get("Service-Worker-Allowed") != "" || h.Get("Clear-Site-Data") != "" {
		t.Errorf("origin-wide headers kept: %v", h)
	}
	csp := h.Values("Content-Security-Policy")
	if len(csp) != 2 || csp[1] != APIOriginCSP || strings.Contains(APIOriginCSP, "allow-same-origin") {
		t.Errorf("CSP %q: want the sandbox's own policy and %q", csp, APIOriginCSP)
	}
	if h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("no nosniff: %v", h)
	}
}
