package httpapi_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/sandbox"
)

// checkProblem asserts that resp is a problem+json answer with status and
// code, and returns it.
func checkProblem(t *testing.T, resp *http.Response, body []byte, status int, code string) client.Problem {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("status %d, want %d (body %s)", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	p := decodeJSON[client.Problem](t, body)
	if p.Status != status || p.Code != code || p.Title != http.StatusText(status) || p.Detail == "" ||
		p.Type != "https://genesis.dev/problems/"+code || p.RequestID == "" || p.RequestID != resp.Header.Get("X-Request-ID") {
		t.Errorf("problem %+v, want status %d code %s with title, detail, type and the response's request id", p, status, code)
	}
	return p
}

func TestAuth(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	routes := []req{
		{method: "GET", path: "/v1/sandboxes"},
		{method: "POST", path: "/v1/sandboxes", body: `{"profile":"` + controltest.Profile + `"}`},
		{method: "GET", path: "/v1/capabilities"},
		{method: "GET", path: "/v1/profiles"},
		{method: "DELETE", path: "/v1/sandboxes/" + sandbox.NewID("sbx")},
		{method: "GET", path: "/v1/jobs/" + sandbox.NewID("job")},
	}
	creds := []struct {
		name   string
		header string
	}{
		{"no header", ""},
		{"wrong key", "Bearer key-x-0123456789abcdef"},
		{"empty bearer", "Bearer "},
		{"basic scheme", "Basic " + keyA},
		{"lowercase scheme", "bearer " + keyA},
		{"key prefix", "Bearer " + keyA[:len(keyA)-1]},
	}
	for _, c := range creds {
		for _, r := range routes {
			t.Run(c.name+" "+r.method+" "+r.path, func(t *testing.T) {
				t.Parallel()
				if c.header != "" {
					r.header = map[string]string{"Authorization": c.header}
				}
				resp, body := a.do(r)
				checkProblem(t, resp, body, http.StatusUnauthorized, "unauthenticated")
				if wa := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(wa, "Bearer ") {
					t.Errorf("WWW-Authenticate %q, want a Bearer challenge", wa)
				}
			})
		}
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		t.Run("no auth needed "+path, func(t *testing.T) {
			t.Parallel()
			if resp, body := a.do(req{method: "GET", path: path}); resp.StatusCode != http.StatusOK {
				t.Errorf("%s without a key: %d %s, want 200", path, resp.StatusCode, body)
			}
		})
	}
	t.Cleanup(a.AssertNothingCreated)
}

func TestTenantIsolationHTTP(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	sb, _ := a.createHTTP(keyA, client.CreateSandboxRequest{Metadata: map[string]string{"k": "v"}})
	path := "/v1/sandboxes/" + sb.ID
	for _, r := range []req{
		{method: "GET", path: path},
		{method: "PATCH", path: path, body: `{"metadata":{"k":"changed"}}`},
		{method: "POST", path: path + "/exec", body: `{"command":["true"]}`},
		{method: "DELETE", path: path},
	} {
		r.key = keyB
		resp, body := a.do(r)
		checkProblem(t, resp, body, http.StatusNotFound, "not_found")
	}
	resp, body := a.do(req{method: "GET", path: "/v1/sandboxes", key: keyB})
	if l := decodeJSON[client.SandboxList](t, body); resp.StatusCode != http.StatusOK || len(l.Items) != 0 {
		t.Errorf("tenant b lists %d sandboxes (status %d), want none", len(l.Items), resp.StatusCode)
	}
	resp, body = a.do(req{method: "GET", path: path, key: keyA})
	got := decodeJSON[client.Sandbox](t, body)
	if resp.StatusCode != http.StatusOK || got.State != "ready" || got.Metadata["k"] != "v" || got.ResourceVersion != sb.ResourceVersion {
		t.Errorf("a's sandbox after b's attempts: %d %+v", resp.StatusCode, got)
	}
	if jobs := a.jobs(sb.ID); len(jobs) != 0 {
		t.Errorf("b's exec was recorded as %d jobs", len(jobs))
	}
}

func TestRequestIDAndProblemShape(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	generated := regexp.MustCompile(`^req_[0-9a-f]{16}$`)
	missing := "/v1/sandboxes/" + sandbox.NewID("sbx")
	tests := []struct {
		name   string
		sent   string // X-Request-ID sent; "" for none
		echoed bool
	}{
		{name: "echoed", sent: "client-req.42:a_b", echoed: true},
		{name: "generated when absent"},
		{name: "replaced when invalid", sent: "has spaces and / slashes"},
		{name: "replaced when too long", sent: strings.Repeat("x", 129)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := req{method: "GET", path: missing, key: keyA}
			if tc.sent != "" {
				r.header = map[string]string{"X-Request-ID": tc.sent}
			}
			resp, body := a.do(r)
			p := checkProblem(t, resp, body, http.StatusNotFound, "not_found")
			got := resp.Header.Get("X-Request-ID")
			if tc.echoed && got != tc.sent {
				t.Errorf("X-Request-ID %q, want the sent %q", got, tc.sent)
			}
			if !tc.echoed && !generated.MatchString(got) {
				t.Errorf("X-Request-ID %q, want a generated req_<16 hex>", got)
			}
			if p.Instance != missing {
				t.Errorf("instance %q, want %q", p.Instance, missing)
			}
			// Success answers carry the id too.
			resp, _ = a.do(req{method: "GET", path: "/healthz", header: r.header})
			if h := resp.Header.Get("X-Request-ID"); h == "" || (tc.echoed && h != tc.sent) {
				t.Errorf("healthz X-Request-ID %q", h)
			}
		})
	}
	// Two generated ids differ.
	r1, _ := a.do(req{method: "GET", path: "/healthz"})
	r2, _ := a.do(req{method: "GET", path: "/healthz"})
	if r1.Header.Get("X-Request-ID") == r2.Header.Get("X-Request-ID") {
		t.Error("generated request ids repeat")
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	sb, _ := a.createHTTP(keyA, client.CreateSandboxRequest{Metadata: map[string]string{"k": "v"}})
	sbPath := "/v1/sandboxes/" + sb.ID
	create := func(body string) req { return req{method: "POST", path: "/v1/sandboxes", body: body} }
	exec := func(body string) req { return req{method: "POST", path: sbPath + "/exec", body: body} }
	patch := func(ifMatch string) req {
		return req{method: "PATCH", path: sbPath, body: `{"metadata":{"k":"changed"}}`, header: map[string]string{"If-Match": ifMatch}}
	}
	big := `{"profile":"` + controltest.Profile + `","metadata":{"x":"` + strings.Repeat("a", maxBody) + `"}}`
	tests := []struct {
		name   string
		r      req
		status int
		code   string
	}{
		{"malformed JSON", create(`{"profile":`), 400, "invalid_argument"},
		{"not JSON", create(`profile=test-basic`), 400, "invalid_argument"},
		{"trailing garbage", create(`{"profile":"test-basic"} x`), 400, "invalid_argument"},
		{"second value", create(`{"profile":"test-basic"} {}`), 400, "invalid_argument"},
		{"trailing brace", create(`{"profile":"test-basic"}}`), 400, "invalid_argument"},
		{"trailing bracket", create(`{"profile":"test-basic"}]`), 400, "invalid_argument"},
		{"unknown field", create(`{"profile":"test-basic","colour":"red"}`), 400, "invalid_argument"},
		{"wrong type", create(`{"profile":5}`), 400, "invalid_argument"},
		{"empty body", create(""), 400, "invalid_argument"},
		{"blank body", create(" \n\t"), 400, "invalid_argument"},
		{"JSON null", create("null"), 400, "invalid_argument"},
		{"body over max_body_bytes", create(big), 413, "too_large"},
		{"multipart", req{method: "POST", path: "/v1/sandboxes", body: `{"profile":"test-basic"}`,
			header: map[string]string{"Content-Type": "multipart/form-data; boundary=x"}}, 400, "unsupported_media_type"},
		{"unknown profile", create(`{"profile":"no-such-profile"}`), 404, "profile_not_found"},
		{"negative cpu", create(`{"profile":"test-basic","resources":{"cpu":-1}}`), 400, "invalid_argument"},
		{"absurd memory", create(`{"profile":"test-basic","resources":{"memory_mb":1099511627776}}`), 400, "invalid_argument"},
		{"negative disk", create(`{"profile":"test-basic","resources":{"disk_mb":-1}}`), 400, "invalid_argument"},
		{"absurd disk", create(`{"profile":"test-basic","resources":{"disk_mb":1099511627776}}`), 400, "invalid_argument"},
		{"tiny disk", create(`{"profile":"test-basic","resources":{"disk_mb":1}}`), 400, "invalid_argument"},
		{"disk quota on a host without", create(`{"profile":"test-basic","resources":{"disk_mb":64}}`), 409, "disk_quota_unavailable"},
		{"lease with a disk quota on a host without", req{method: "POST", path: "/v1/leases", body: `{"profile":"test-basic","resources":{"disk_mb":64}}`}, 409, "disk_quota_unavailable"},
		{"lease with a negative disk", req{method: "POST", path: "/v1/leases", body: `{"profile":"test-basic","resources":{"disk_mb":-5}}`}, 400, "invalid_argument"},
		{"unknown runtime", create(`{"profile":"test-basic","runtime":"kvm"}`), 400, "runtime_not_allowed"},
		{"runc for untrusted", create(`{"profile":"test-basic","runtime":"runc","risk_level":"untrusted"}`), 400, "runtime_not_allowed"},
		{"ttl over max", create(`{"profile":"test-basic","ttl_seconds":86401}`), 400, "invalid_argument"},
		{"image not built", create(`{"profile":"browser-playwright"}`), 409, "image_not_built"},
		{"exec command and script", exec(`{"command":["echo"],"script":"echo"}`), 400, "invalid_argument"},
		{"exec neither command nor script", exec(`{"cwd":"/"}`), 400, "invalid_argument"},
		{"exec relative cwd", exec(`{"command":["pwd"],"cwd":"tmp"}`), 400, "invalid_argument"},
		{"exec negative timeout", exec(`{"command":["true"],"timeout_ms":-1}`), 400, "invalid_argument"},
		{"exec unknown field", exec(`{"command":["true"],"shell":"bash"}`), 400, "invalid_argument"},
		{"exec unknown sandbox", req{method: "POST", path: "/v1/sandboxes/" + sandbox.NewID("sbx") + "/exec", body: `{"command":["true"]}`}, 404, "not_found"},
		{"If-Match mismatch", patch(`"999"`), 412, "precondition_failed"},
		{"malformed If-Match", patch(`abc`), 400, "invalid_argument"},
		{"zero If-Match", patch(`"0"`), 412, "precondition_failed"},
		{"opaque If-Match", patch(`"bogus"`), 412, "precondition_failed"},
		{"another resource's ETag", patch(`"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"`), 412, "precondition_failed"},
		{"weak If-Match", patch(`W/"1"`), 412, "precondition_failed"},
		{"unterminated If-Match", patch(`"1`), 400, "invalid_argument"},
		{"star in a list", patch(`*, "1"`), 400, "invalid_argument"},
		{"patch bad metadata key", req{method: "PATCH", path: sbPath, body: `{"metadata":{"bad key":"x"}}`}, 400, "invalid_argument"},
		{"patch unknown sandbox", req{method: "PATCH", path: "/v1/sandboxes/" + sandbox.NewID("sbx"), body: `{"metadata":{}}`}, 404, "not_found"},
		{"get malformed sandbox id", req{method: "GET", path: "/v1/sandboxes/..%2f..%2fetc"}, 404, "not_found"},
		{"list bad metadata filter", req{method: "GET", path: "/v1/sandboxes?metadata=novalue"}, 400, "invalid_argument"},
		{"list bad state", req{method: "GET", path: "/v1/sandboxes?state=bogus"}, 400, "invalid_argument"},
		{"unknown route", req{method: "GET", path: "/v1/nope"}, 404, "route_not_found"},
		{"unknown root route", req{method: "GET", path: "/"}, 404, "route_not_found"},
		{"unknown job id", req{method: "GET", path: "/v1/jobs/" + sandbox.NewID("job")}, 404, "not_found"},
		{"malformed job id", req{method: "GET", path: "/v1/jobs/nope"}, 404, "not_found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.r.key = keyA
			resp, body := a.do(tc.r)
			checkProblem(t, resp, body, tc.status, tc.code)
		})
	}
	t.Cleanup(func() {
		// Nothing was created or changed by any of them.
		if recs := a.Records(); len(recs) != 1 || recs[0].ID != sb.ID {
			t.Errorf("%d records after bad input, want only the first sandbox", len(recs))
		}
		if cs := a.Containers(); len(cs) != 1 {
			t.Errorf("%d containers after bad input, want 1", len(cs))
		}
		rec := a.Record(sb.ID)
		if rec.State != sandbox.StateReady || rec.Metadata["k"] != "v" || len(rec.Metadata) != 1 {
			t.Errorf("sandbox changed by bad input: %s %v", rec.State, rec.Metadata)
		}
		if jobs := a.jobs(sb.ID); len(jobs) != 0 {
			t.Errorf("bad exec requests recorded %d jobs", len(jobs))
		}
	})
}

func TestHappyPath(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)

	sb, resp := a.createHTTP(keyA, client.CreateSandboxRequest{
		Env:      map[string]string{"GREETING": "secret-value"},
		Metadata: map[string]string{"team": "x", "owner": "me"},
	})
	if sb.State != "ready" || sb.Profile != controltest.Profile || sb.Runtime != "runc" || sb.RiskLevel != "low" ||
		!slices.Equal(sb.EnvKeys, []string{"GREETING"}) || sb.ExpiresAt == nil {
		t.Errorf("created %+v", sb)
	}
	if etag := resp.Header.Get("ETag"); etag != `"`+sb.ResourceVersion+`"` {
		t.Errorf("ETag %q, want the quoted resourceVersion %q", etag, sb.ResourceVersion)
	}
	if loc := resp.Header.Get("Location"); loc != "/v1/sandboxes/"+sb.ID {
		t.Errorf("Location %q", loc)
	}
	other, _ := a.createHTTP(keyA, client.CreateSandboxRequest{Metadata: map[string]string{"team": "y"}, RiskLevel: "high"})
	if other.Runtime != "runsc" {
		t.Errorf("high-risk sandbox runs %s, want runsc", other.Runtime)
	}

	path := "/v1/sandboxes/" + sb.ID
	resp, body := a.do(req{method: "GET", path: path, key: keyA})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("ETag") != `"`+sb.ResourceVersion+`"` {
		t.Fatalf("get: %d ETag %q", resp.StatusCode, resp.Header.Get("ETag"))
	}
	if strings.Contains(string(body), "secret-value") {
		t.Error("an env value is shown by GET")
	}
	if got := decodeJSON[client.Sandbox](t, body); got.ID != sb.ID || !maps.Equal(got.Metadata, sb.Metadata) {
		t.Errorf("get returned %+v", got)
	}

	lists := []struct {
		query string
		want  []string
	}{
		{"", []string{sb.ID, other.ID}},
		{"?state=ready", []string{sb.ID, other.ID}},
		{"?state=destroyed,failed", nil},
		{"?state=failed&state=ready", []string{sb.ID, other.ID}},
		{"?profile=" + controltest.Profile, []string{sb.ID, other.ID}},
		{"?profile=tool-basic", nil},
		{"?metadata=team=x", []string{sb.ID}},
		{"?metadata=team=y", []string{other.ID}},
		{"?metadata=team=x&metadata=owner=me", []string{sb.ID}},
		{"?metadata=team=x&metadata=owner=you", nil},
	}
	for _, l := range lists {
		resp, body := a.do(req{method: "GET", path: "/v1/sandboxes" + l.query, key: keyA})
		var ids []string
		for _, it := range decodeJSON[client.SandboxList](t, body).Items {
			ids = append(ids, it.ID)
		}
		if resp.StatusCode != http.StatusOK || !slices.Equal(ids, l.want) {
			t.Errorf("list%s: %d %v, want %v", l.query, resp.StatusCode, ids, l.want)
		}
	}

	// Patch with the ETag, then with the stale one.
	etag := `"` + sb.ResourceVersion + `"`
	resp, body = a.do(req{method: "PATCH", path: path, key: keyA, body: `{"metadata":{"owner":null,"stage":"2"}}`,
		header: map[string]string{"If-Match": etag}})
	patched := decodeJSON[client.Sandbox](t, body)
	newTag := resp.Header.Get("ETag")
	if resp.StatusCode != http.StatusOK || newTag == etag || newTag != `"`+patched.ResourceVersion+`"` ||
		!maps.Equal(patched.Metadata, map[string]string{"team": "x", "stage": "2"}) {
		t.Errorf("patch: %d ETag %q → %q, metadata %v", resp.StatusCode, etag, newTag, patched.Metadata)
	}
	resp, body = a.do(req{method: "PATCH", path: path, key: keyA, body: `{"metadata":{"stage":"3"}}`,
		header: map[string]string{"If-Match": etag}})
	checkProblem(t, resp, body, http.StatusPreconditionFailed, "precondition_failed")
	// "*" matches whatever the current version is.
	resp, body = a.do(req{method: "PATCH", path: path, key: keyA, body: `{"metadata":{"stage":"3"}}`,
		header: map[string]string{"If-Match": "*"}})
	if starred := decodeJSON[client.Sandbox](t, body); resp.StatusCode != http.StatusOK || starred.Metadata["stage"] != "3" {
		t.Errorf("patch with If-Match *: %d %s", resp.StatusCode, body)
	}

	// Exec and its job record.
	resp, body = a.do(req{method: "POST", path: path + "/exec", key: keyA, body: `{"command":["echo","hi"]}`})
	res := decodeJSON[client.ExecResult](t, body)
	if resp.StatusCode != http.StatusOK || res.Stdout != "hi\n" || res.ExitCode != 0 || res.ExitReason != "exited" || res.JobID == "" {
		t.Fatalf("exec: %d %+v", resp.StatusCode, res)
	}
	resp, body = a.do(req{method: "POST", path: path + "/exec", key: keyA, body: `{"script":"printf \"$GREETING\" >&2; exit 4"}`})
	fail := decodeJSON[client.ExecResult](t, body)
	if resp.StatusCode != http.StatusOK || fail.ExitCode != 4 || fail.Stderr != "secret-value" {
		t.Errorf("failing exec: %d %+v, want 200 with exit code 4", resp.StatusCode, fail)
	}
	resp, body = a.do(req{method: "GET", path: "/v1/jobs/" + res.JobID, key: keyA})
	job := decodeJSON[client.Job](t, body)
	if resp.StatusCode != http.StatusOK || job.State != "succeeded" || job.ExitCode == nil || *job.ExitCode != 0 ||
		job.SandboxID != sb.ID || job.FinishedAt == nil || job.StdoutBytes != 3 {
		t.Errorf("job: %d %+v", resp.StatusCode, job)
	}
	if resp, _ := a.do(req{method: "GET", path: "/v1/jobs/" + res.JobID, key: keyB}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("tenant b sees a's job: %d", resp.StatusCode)
	}

	// Delete twice.
	for i := range 2 {
		resp, body := a.do(req{method: "DELETE", path: path, key: keyA})
		if resp.StatusCode != http.StatusNoContent || len(body) != 0 {
			t.Errorf("delete #%d: %d %q, want 204 without a body", i+1, resp.StatusCode, body)
		}
	}
	resp, body = a.do(req{method: "GET", path: path, key: keyA})
	if got := decodeJSON[client.Sandbox](t, body); resp.StatusCode != http.StatusOK || got.State != "destroyed" {
		t.Errorf("after delete: %d %s", resp.StatusCode, got.State)
	}
	if _, ok := a.Container(sb.ID); ok || controltest.Exists(a.SandboxDir(sb.ID)) {
		t.Error("deleted sandbox left its container or dir")
	}
	if _, ok := a.Container(other.ID); !ok {
		t.Error("deleting one sandbox removed the other's container")
	}

	// Discovery answers with the test profile usable.
	resp, body = a.do(req{method: "GET", path: "/v1/profiles", key: keyA})
	var found bool
	for _, p := range decodeJSON[client.ProfileList](t, body).Items {
		if p.Name == controltest.Profile {
			found = p.ImageStatus == "present" && slices.Equal(p.UsableRuntimes, []string{"runc", "runsc"})
		}
	}
	if resp.StatusCode != http.StatusOK || !found {
		t.Errorf("profiles: %d, test profile present and usable: %v", resp.StatusCode, found)
	}
	resp, body = a.do(req{method: "GET", path: "/v1/capabilities", key: keyA})
	caps := decodeJSON[client.Capabilities](t, body)
	if resp.StatusCode != http.StatusOK || caps.Driver != "fake" || !caps.Healthy || len(caps.Runtimes) != 2 ||
		!slices.Equal(caps.RiskPolicy["high"], []string{"runsc"}) || !slices.Equal(caps.RiskPolicy["low"], []string{"runc", "runsc"}) {
		t.Errorf("capabilities: %d %+v", resp.StatusCode, caps)
	}
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil || raw["profiles"] == nil {
		t.Errorf("capabilities body lacks profiles: %v", err)
	}
}
