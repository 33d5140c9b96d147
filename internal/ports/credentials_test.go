package ports

import (
	"net/http"
	"slices"
	"testing"
)

func TestStripCredentials(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		in         http.Header
		want       http.Header
		wantCookie []string
	}{
		{
			name: "every credential header, in any spelling",
			in: http.Header{
				"Authorization": {"Bearer k"}, "Proxy-Authorization": {"Basic x"}, "X-Api-Key": {"k"},
				"Open-Sandbox-Api-Key": {"k"}, "X-Access-Token": {"t"}, "E2b-Traffic-Access-Token": {"t"},
				"x-api-key": {"k"}, "OPEN-SANDBOX-API-KEY": {"k"}, "e2b-traffic-access-token": {"t"},
				"X-Genesis-Tenant": {"other"}, "X-Genesis-Sandbox-Token": {"gst_v2.a.b"}, "x-genesis-anything": {"1"},
				"Accept": {"text/html"}, "X-Forwarded-Prefix": {"/p"}, "X-Genesisx": {"not ours"},
			},
			want: http.Header{"Accept": {"text/html"}, "X-Forwarded-Prefix": {"/p"}, "X-Genesisx": {"not ours"}},
		},
		{
			name:       "the service's cookies, others kept",
			in:         http.Header{"Cookie": {"genesis_preview=tok; app=1;  GENESIS_x=2 ;session=s=1", "genesis_other=3"}},
			wantCookie: []string{"app=1; session=s=1"},
		},
		{
			name:       "only the service's cookies",
			in:         http.Header{"Cookie": {"genesis_preview=tok"}},
			wantCookie: nil,
		},
		{
			name:       "no cookie of the service's: unchanged",
			in:         http.Header{"Cookie": {"a=1;b=2"}},
			wantCookie: []string{"a=1;b=2"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := c.in.Clone()
			StripCredentials(h)
			if c.want != nil {
				for k := range c.want {
					if !slices.Equal(h[k], c.want[k]) {
						t.Errorf("%s: %q, want %q", k, h[k], c.want[k])
					}
				}
				for k := range h {
					if _, ok := c.want[k]; !ok {
						t.Errorf("%s: %q left", k, h[k])
					}
				}
			}
			if c.in.Get("Cookie") != "" && !slices.Equal(h.Values("Cookie"), c.wantCookie) {
				t.Errorf("Cookie: %q, want %q", h.Values("Cookie"), c.wantCookie)
			}
		})
	}
}
