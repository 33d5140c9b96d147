package httpapi_test

import (
	"net/http"
	"testing"

	"genesis.dev/sandbox/client"
)

func TestWhoami(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	for _, tc := range []struct {
		key, tenant string
		admin       bool
	}{{keyA, "a", false}, {keyB, "b", false}, {keyAdmin, "admin", true}} {
		resp, body := a.do(req{method: "GET", path: "/v1/whoami", key: tc.key})
		w := decodeJSON[client.Whoami](t, body)
		if resp.StatusCode != http.StatusOK || w.Tenant != tc.tenant || w.Admin != tc.admin || w.KeyID == "" {
			t.Errorf("whoami of tenant %s: %d %+v", tc.tenant, resp.StatusCode, w)
		}
	}
	resp, body := a.do(req{method: "GET", path: "/v1/whoami", key: "wrong-key-0123456789"})
	checkProblem(t, resp, body, http.StatusUnauthorized, "unauthenticated")
}
