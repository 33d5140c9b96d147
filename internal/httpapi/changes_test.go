package httpapi_test

import (
	"strings"
	"testing"

	"genesis.dev/sandbox/client"
)

// TestChangesBadInput: the diff and patch routes refuse bad input with a
// problem whose code says what is wrong and whose detail is a sentence,
// before they touch a sandbox; another tenant's sandbox is 404.
func TestChangesBadInput(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	sb, _ := a.createHTTP(keyA, client.CreateSandboxRequest{})
	base := "/v1/sandboxes/" + sb.ID
	textPatch := map[string]string{"Content-Type": "text/x-patch"}
	good := "--- a/x.txt\n+++ b/x.txt\n@@ -1 +1 @@\n-a\n+b\n"
	for _, c := range []struct {
		name   string
		r      req
		status int
		code   string
	}{
		{"format", req{method: "GET", path: base + "/diff?format=html", key: keyA}, 400, "invalid_format"},
		{"base", req{method: "GET", path: base + "/diff?base=HEAD~1", key: keyA}, 400, "invalid_base"},
		{"malformed snapshot id", req{method: "GET", path: base + "/diff?base=snap_nope", key: keyA}, 404, "not_found"},
		{"malformed sandbox id", req{method: "GET", path: base + "/diff?base=sbx_nope", key: keyA}, 404, "not_found"},
		{"json body", req{method: "POST", path: base + "/patch", key: keyA, body: `{"patch":"x"}`}, 400, "patch_invalid"},
		{"json body with an unknown field", req{method: "POST", path: base + "/patch", key: keyA, body: `{"diff":"x"}`}, 400, "invalid_argument"},
		{"multipart", req{method: "POST", path: base + "/patch", key: keyA, body: "x", header: map[string]string{"Content-Type": "multipart/form-data; boundary=x"}}, 400, "unsupported_media_type"},
		{"not a patch", req{method: "POST", path: base + "/patch", key: keyA, body: "hello\n", header: textPatch}, 400, "patch_invalid"},
		{"escape", req{method: "POST", path: base + "/patch", key: keyA, body: strings.ReplaceAll(good, "x.txt", "../x.txt"), header: textPatch}, 400, "path_outside_root"},
		{"too large", req{method: "POST", path: base + "/patch", key: keyA, body: good + strings.Repeat("+"+strings.Repeat("y", 1<<20)+"\n", 9), header: textPatch}, 413, "patch_too_large"},
		{"dry run flag", req{method: "POST", path: base + "/patch?dry_run=maybe", key: keyA, body: good, header: textPatch}, 400, "invalid_argument"},
		{"other tenant's diff", req{method: "GET", path: base + "/diff", key: keyB}, 404, "not_found"},
		{"other tenant's patch", req{method: "POST", path: base + "/patch", key: keyB, body: good, header: textPatch}, 404, "not_found"},
	} {
		resp, body := a.do(c.r)
		p := checkProblem(t, resp, body, c.status, c.code)
		if c.name != "dry run flag" { // parseBool's message, shared by every boolean query
			checkSentence(t, c.name, p.Detail)
		}
	}
}
