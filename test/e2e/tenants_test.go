package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/testenv"
)

// foreignBodies are valid request bodies (and queries) per route, so that a
// foreign tenant's call fails on the resource, not on its input.
var foreignBodies = map[string]string{
	"PATCH /v1/sandboxes/{id}":                       `{"metadata":{"owner":"thief"}}`,
	"POST /v1/sandboxes/{id}/exec":                   `{"command":["touch","/workspace/pwned"]}`,
	"POST /v1/sandboxes/{id}/contexts":               `{"language":"python"}`,
	"POST /v1/sessions/{id}/exec":                    `{"script":"touch /workspace/pwned"}`,
	"POST /v1/contexts/{id}/run":                     `{"code":"open('/workspace/pwned','w')"}`,
	"PUT /v1/sandboxes/{id}/files":                   `pwned`,
	"POST /v1/sandboxes/{id}/files/mkdir":            `{"path":"pwned"}`,
	"POST /v1/sandboxes/{id}/files/move":             `{"from":"secret.txt","to":"moved.txt"}`,
	"POST /v1/sandboxes/{id}/files/delete":           `{"path":"secret.txt"}`,
	"POST /v1/sandboxes/{id}/files/chmod":            `{"path":"secret.txt","mode":"0777"}`,
	"POST /v1/sandboxes/{id}/files/search":           `{"path":".","content":"s3cret"}`,
	"POST /v1/sandboxes/{id}/files/replace":          `{"path":".","glob":"*.txt","find":"s3cret","replace":"pwned"}`,
	"POST /v1/sandboxes/{id}/files/extract":          "",
	"POST /v1/sandboxes/{id}/sessions":               "",
	"POST /v1/jobs/{id}/cancel":                      "",
	"DELETE /v1/sandboxes/{id}":                      "",
	"DELETE /v1/sessions/{id}":                       "",
	"DELETE /v1/contexts/{id}":                       "",
	"GET /v1/sandboxes/{id}/terminal":                "",
	"POST /v1/sandboxes/{id}/terminal/tickets":       "{}",
	"GET /v1/sandboxes/{id}/files":                   "",
	"GET /v1/sandboxes/{id}/files/stat":              "",
	"GET /v1/sandboxes/{id}/files/list":              "",
	"GET /v1/sandboxes/{id}/files/archive":           "",
	"GET /v1/sandboxes/{id}":                         "",
	"GET /v1/jobs/{id}":                              "",
	"GET /v1/jobs/{id}/logs":                         "",
	"GET /v1/sessions/{id}":                          "",
	"GET /v1/contexts/{id}":                          "",
	"POST /v1/sandboxes/{id}/files":                  multipartMarker,
	"GET /v1/leases/{id}":                            "",
	"POST /v1/leases/{id}/renew":                     `{"ttl_seconds":600}`,
	"DELETE /v1/leases/{id}":                         "",
	"GET /v1/sandboxes/{id}/network":                 "",
	"PUT /v1/sandboxes/{id}/network":                 `{"mode":"none"}`,
	"GET /v1/sandboxes/{id}/network/events":          "",
	"GET /v1/jobs/{id}/artifacts":                    "",
	"GET /v1/artifacts/{id}":                         "",
	"GET /v1/artifacts/{id}/meta":                    "",
	"GET /v1/jobs/{id}/attach":                       "",
	"PUT /v1/jobs/{id}/stdin":                        "pwned",
	"POST /v1/jobs/{id}/stdin/close":                 "",
	"GET /v1/sandboxes/{id}/ports/{port}/tcp":        "",
	"POST /v1/sandboxes/{id}/ports/{port}/links":     `{"ttl_seconds":60}`,
	"GET /v1/sandboxes/{id}/ports/{port}/{path}":     "",
	"HEAD /v1/sandboxes/{id}/ports/{port}/{path}":    "",
	"POST /v1/sandboxes/{id}/ports/{port}/{path}":    "pwned",
	"PUT /v1/sandboxes/{id}/ports/{port}/{path}":     "pwned",
	"PATCH /v1/sandboxes/{id}/ports/{port}/{path}":   "pwned",
	"DELETE /v1/sandboxes/{id}/ports/{port}/{path}":  "",
	"OPTIONS /v1/sandboxes/{id}/ports/{port}/{path}": "",
	"GET /v1/sandboxes/{id}/browser":                 "",
	"GET /v1/sandboxes/{id}/browser/devtools/{path}": "",
	"GET /v1/sandboxes/{id}/browser/playwright":      "",
	"POST /v1/sandboxes/{id}/browser/actions":        `{"actions":[{"type":"evaluate","expression":"1"}]}`,
	"POST /v1/sandboxes/{id}/computer/actions":       `{"actions":[{"action":"left_click","coordinate":[1,1]}]}`,
	"GET /v1/sandboxes/{id}/control":                 "",
	"GET /v1/sandboxes/{id}/display/vnc":             "",
	"GET /v1/sandboxes/{id}/display/viewer":          "",
	"POST /v1/traces/{id}/replay":                    `{"target_sandbox":"sbx_00000000000000000001"}`,
	"POST /v1/sandboxes/{id}/display/recording":      `{"fps":5}`,
	"GET /v1/sandboxes/{id}/display/recording":       "",
	"DELETE /v1/sandboxes/{id}/display/recording":    "",
	"POST /v1/sandboxes/{id}/browser/recording":      `{"fps":5}`,
	"GET /v1/sandboxes/{id}/browser/recording":       "",
	"DELETE /v1/sandboxes/{id}/browser/recording":    "",
	"POST /v1/sandboxes/{id}/renew":                  `{"ttl_seconds":600}`,
	"GET /v1/sandboxes/{id}/jobs":                    "",
	"POST /v1/sandboxes/{id}/display/links":          `{"role":"controller","ttl_seconds":60}`,
	"POST /v1/sandboxes/{id}/control":                `{"holder":"human:mallory"}`,
	"DELETE /v1/sandboxes/{id}/control":              "",
	"POST /v1/sandboxes/{id}/control/requests":       `{"reason":"pwned"}`,
	"POST /v1/sandboxes/{id}/browser/links":          `{"ttl_seconds":60}`,
	"GET /v1/sandboxes/{id}/browser/downloads":       "",
	"POST /v1/sandboxes/{id}/browser/downloads/keep": `{"names":["x"]}`,
	"GET /v1/sandboxes/{id}/trace":                   "",
	"GET /v1/sandboxes/{id}/trace/export":            "",
	"POST /v1/sandboxes/{id}/trace/events":           `{"kind":"annotation","data":{"text":"x"}}`,
	"POST /v1/sandboxes/{id}/trace/pause":            `{}`,
	"POST /v1/sandboxes/{id}/pause":                  "",
	"POST /v1/sandboxes/{id}/resume":                 "",
	"POST /v1/sandboxes/{id}/hibernate":              "",
	"POST /v1/sandboxes/{id}/snapshots":              `{"name":"stolen","memory":false}`,
	"GET /v1/sandboxes/{id}/snapshots":               "",
	"POST /v1/sandboxes/{id}/fork":                   `{"count":1}`,
	"POST /v1/sandboxes/{id}/rollback":               `{"snapshot_id":"snap_00000000000000000000"}`,
	"GET /v1/snapshots/{id}":                         "",
	"DELETE /v1/snapshots/{id}":                      "",
	"POST /v1/sandboxes/{id}/trace/resume":           `{}`,
	"POST /v1/sandboxes/{id}/trace/step":             `{}`,
	"POST /v1/sandboxes/{id}/trace/abort":            `{}`,
	"POST /v1/sandboxes/{id}/browser/profile/save":   `{}`,
	"POST /v1/sandboxes/{id}/browser/profile/load":   `{"artifact_id":"art_00000000000000000000"}`,
	"GET /v1/sandboxes/{id}/browser/json":            "",
	"GET /v1/sandboxes/{id}/diff":                    "",
	"POST /v1/sandboxes/{id}/patch":                  "--- a/secret.txt\n+++ b/secret.txt\n@@ -1 +1 @@\n-s3cret\n+pwned\n",
	"GET /v1/sandboxes/{id}/browser/json/{path}":     "",
	"HEAD /v1/sandboxes/{id}/browser/json":           "",
	"HEAD /v1/sandboxes/{id}/browser/json/{path}":    "",
	"POST /v1/sandboxes/{id}/browser/json":           "",
	"POST /v1/sandboxes/{id}/browser/json/{path}":    "",
	"PUT /v1/sandboxes/{id}/browser/json":            "",
	"PUT /v1/sandboxes/{id}/browser/json/{path}":     "",
	"PATCH /v1/sandboxes/{id}/browser/json":          "",
	"PATCH /v1/sandboxes/{id}/browser/json/{path}":   "",
	"DELETE /v1/sandboxes/{id}/browser/json":         "",
	"DELETE /v1/sandboxes/{id}/browser/json/{path}":  "",
	"OPTIONS /v1/sandboxes/{id}/browser/json":        "",
	"OPTIONS /v1/sandboxes/{id}/browser/json/{path}": "",
}

// multipartMarker stands for a multipart/form-data upload of one file.
const multipartMarker = "\x00multipart"

// documentedRoutes lists "METHOD /path" of every operation in
// api/openapi.yaml (the contract test ties it to the served routes).
func documentedRoutes(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(t), "api", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	for path, item := range doc.Paths {
		for m := range item {
			if m != "parameters" {
				out = append(out, strings.ToUpper(m)+" "+path)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestCrossTenantIsolation gives tenant "default" a sandbox with a file, a
// running job, a shell session and a code context, under runc and runsc,
// then walks every documented route that names a resource with another
// tenant's key: each answers 404 exactly as for an id that does not exist
// (no existence leak), and afterwards nothing of the owner's has changed.
// A route whose path parameter this test does not know fails it, so new
// resource routes must be added here.
func TestCrossTenantIsolation(t *testing.T) {
	t.Parallel()
	const otherKey, cappedKey = "e2e-other-tenant-key-0123456789", "e2e-capped-tenant-key-0123456789"
	e := newEnv(t, "tenants:\n  other: {api_keys: [\""+otherKey+"\"]}\n"+
		"  capped-runc: {api_keys: [\""+cappedKey+"-runc\"], quotas: {max_sandboxes: 1}}\n"+
		"  capped-runsc: {api_keys: [\""+cappedKey+"-runsc\"], quotas: {max_sandboxes: 1}}\n")
	e.requireImage(t, "code-python-basic")
	svc := e.start(t)
	owner, other := svc.client(), client.New(svc.url(), otherKey)
	routes := documentedRoutes(t)

	t.Run("mcp-and-skills", func(t *testing.T) {
		t.Parallel()
		crossTenantMCPAndSkills(t, e, svc, otherKey, routes)
	})
	t.Run("e2b", func(t *testing.T) {
		t.Parallel()
		crossTenantE2B(t, e, svc, otherKey, routes)
	})
	t.Run("opensandbox", func(t *testing.T) {
		t.Parallel()
		crossTenantOpenSandbox(t, e, svc, otherKey, routes)
	})
	t.Run("volumes", func(t *testing.T) {
		t.Parallel()
		crossTenantVolumes(t, svc, otherKey, routes)
	})
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			// Each call has its own context: one for the whole subtest would
			// let slow early steps on a loaded machine starve the later ones.
			sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: "low", Metadata: map[string]string{"owner": "default"}})
			res, err := owner.Exec(callCtx(t), sb.ID, client.ExecRequest{Script: "echo s3cret > /workspace/secret.txt", TimeoutMS: 30_000,
				Artifacts: &client.ArtifactRequest{Paths: []string{"secret.txt"}}})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("writing the secret: %+v %v", res, err)
			}
			arts, err := owner.ListArtifacts(callCtx(t), res.JobID)
			if err != nil || len(arts.Items) != 1 {
				t.Fatalf("artifacts of %s: %+v %v", res.JobID, arts, err)
			}
			job, err := owner.StartJob(callCtx(t), sb.ID, client.ExecRequest{Command: []string{"sleep", "300"}, TimeoutMS: 600_000})
			if err != nil {
				t.Fatal(err)
			}
			ses, err := owner.CreateSession(callCtx(t), sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			cx, err := owner.CreateContext(callCtx(t), sb.ID, client.CreateContextRequest{Language: "python"})
			if err != nil {
				t.Fatal(err)
			}
			ttl := int64(300)
			lease, err := owner.AcquireLease(callCtx(t), client.AcquireLeaseRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: "low", TTLSeconds: &ttl})
			if err != nil {
				t.Fatalf("lease: %v", err)
			}
			defer func() {
				if err := owner.ReleaseLease(callCtx(t), lease.LeaseID); err != nil {
					t.Errorf("releasing the lease: %v", err)
				}
			}()
			memory := false
			snap, err := owner.CreateSnapshot(callCtx(t), sb.ID, client.CreateSnapshotRequest{Name: "owners", Memory: &memory})
			if err != nil {
				t.Fatalf("snapshot: %v", err)
			}
			ids := map[string][2]string{ // prefix → owner's id, an id nobody has
				"/v1/snapshots/": {snap.ID, "snap_0000000000000000"},
				"/v1/sandboxes/": {sb.ID, "sbx_00000000000000000000"},
				"/v1/traces/":    {sb.ID, "sbx_00000000000000000000"},
				"/v1/jobs/":      {job.ID, "job_00000000000000000000"},
				"/v1/sessions/":  {ses.ID, "ses_00000000000000000000"},
				"/v1/contexts/":  {cx.ID, "ctx_00000000000000000000"},
				"/v1/artifacts/": {arts.Items[0].ID, "art_00000000000000000000"},
				"/v1/leases/":    {lease.LeaseID, "lse_00000000000000000000"},
			}
			before, _ := owner.GetSandbox(callCtx(t), sb.ID)

			walked := 0
			for _, route := range routes {
				method, path, _ := strings.Cut(route, " ")
				if !strings.Contains(path, "{") || strings.HasPrefix(path, "/v1/tenants") || strings.HasPrefix(path, "/v1/pools/") ||
					strings.HasPrefix(path, "/v1/previews/") || strings.HasPrefix(path, "/v1/browsers/") || strings.HasPrefix(path, "/v1/displays/") || strings.HasPrefix(path, "/viewer/") ||
					strings.HasPrefix(path, "/v1/mcp/") || strings.HasPrefix(path, "/v1/skills/") || strings.HasPrefix(path, "/e2b/") || strings.HasPrefix(path, "/opensandbox/") || strings.HasPrefix(path, "/v1/volumes/") {
					// MCP servers and skills are walked by crossTenantMCPAndSkills, volumes by crossTenantVolumes,
					// the E2B and OpenSandbox adapters' routes by crossTenantE2B and crossTenantOpenSandbox
					// collections, the admin API (403 for tenant keys, tested in httpapi), service-wide
					// pools, preview, browser and display links (their token is the
					// credential: tested in TestPorts, TestBrowser, TestDesktopLiveView and
					// TestDesktopViewer), and the live-view page's static files
					continue
				}
				// A port route: port 8000 and a path on the sandbox's server.
				path = strings.NewReplacer("{port}", "8000", "{path}", "x").Replace(path)
				var pair [2]string
				for prefix, p := range ids {
					if strings.HasPrefix(path, prefix) && strings.Count(path, "{") == 1 && strings.Contains(path, "{id}") {
						pair = p
					}
				}
				body, known := foreignBodies[route]
				if pair[0] == "" || !known {
					t.Errorf("%s names a resource this test does not know: add it to the isolation walk", route)
					continue
				}
				walked++
				foreign := callRaw(t, svc, otherKey, method, strings.Replace(path, "{id}", pair[0], 1), body)
				missing := callRaw(t, svc, otherKey, method, strings.Replace(path, "{id}", pair[1], 1), body)
				want := http.StatusNotFound
				if route == "DELETE /v1/snapshots/{id}" {
					want = http.StatusNoContent // idempotent: deleting a snapshot nobody has succeeds (the owner's is checked below)
				}
				if foreign.status != want || foreign.status != missing.status || foreign.code != missing.code {
					t.Errorf("%s with another tenant's key: %d %s %q; for a missing id: %d %s; want the same %d",
						route, foreign.status, foreign.code, foreign.detail, missing.status, missing.code, want)
				}
				if strings.Contains(foreign.detail, "s3cret") {
					t.Errorf("%s leaks file content: %s", route, foreign.detail)
				}
			}
			if walked < 20 {
				t.Fatalf("walked only %d routes", walked)
			}
			t.Logf("%s: %d routes answered another tenant 404, as for a missing id", rt, walked)

			// Lists of the other tenant do not show the owner's sandbox.
			list, err := other.ListSandboxes(callCtx(t), client.ListSandboxesOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range list.Items {
				if x.ID == sb.ID {
					t.Errorf("the other tenant's list shows %s", sb.ID)
				}
			}
			// Nothing changed.
			after, err := owner.GetSandbox(callCtx(t), sb.ID)
			if err != nil || after.State != "ready" || after.ResourceVersion != before.ResourceVersion || after.Metadata["owner"] != "default" {
				t.Errorf("sandbox after the walk: %+v %v (before: version %s)", after, err, before.ResourceVersion)
			}
			if got, err := owner.GetSnapshot(callCtx(t), snap.ID); err != nil || got.State != snap.State {
				t.Errorf("the owner's snapshot after the walk: %+v %v", got, err)
			}
			if r := execOK(t, owner, sb.ID, "cat /workspace/secret.txt; stat -c %a /workspace/secret.txt; ls /workspace"); r.Stdout != "s3cret\n644\nsecret.txt\n" {
				t.Errorf("workspace after the walk: %q", r.Stdout)
			}
			if j, err := owner.GetJob(callCtx(t), job.ID); err != nil || j.State != "running" {
				t.Errorf("job after the walk: %+v %v", j, err)
			}
			if s, err := owner.GetSession(callCtx(t), ses.ID); err != nil || s.State != "active" || s.Runs != 0 {
				t.Errorf("session after the walk: %+v %v", s, err)
			}
			if c, err := owner.GetContext(callCtx(t), cx.ID); err != nil || c.State != "active" || c.Runs != 0 {
				t.Errorf("context after the walk: %+v %v", c, err)
			}
			if l, err := owner.GetLease(callCtx(t), lease.LeaseID); err != nil || l.State != "active" || l.ResourceVersion != lease.ResourceVersion {
				t.Errorf("lease after the walk: %+v %v (before: version %s)", l, err, lease.ResourceVersion)
			}
			if _, err := owner.CancelJob(callCtx(t), job.ID); err != nil {
				t.Errorf("owner's cancel: %v", err)
			}

			// The owner's audit records name the sandbox; the CLI shows them.
			if r := svc.cli(t, "audit", "--target", sb.ID, "-o", "json"); r.code != 0 ||
				!strings.Contains(r.stdout, `"action":"POST /v1/sandboxes/{id}/exec"`) || strings.Contains(r.stdout, `"tenant":"other"`) {
				t.Errorf("audit of %s: %s", sb.ID, r)
			}

			// A tenant with a quota of one sandbox: of three concurrent
			// creates, one is served and two get 429 quota_exceeded.
			capped := client.New(svc.url(), cappedKey+"-"+rt)
			type result struct {
				sb  *client.Sandbox
				err error
			}
			results := make(chan result, 3)
			for range 3 {
				go func() {
					sb, err := capped.CreateSandbox(callCtx(t), client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: "low"}, "")
					results <- result{sb, err}
				}()
			}
			served, refused := 0, 0
			for range 3 {
				r := <-results
				var ae *client.APIError
				switch {
				case r.err == nil:
					served++
					if err := capped.DeleteSandbox(callCtx(t), r.sb.ID); err != nil {
						t.Errorf("deleting %s: %v", r.sb.ID, err)
					}
				case errors.As(r.err, &ae) && ae.Status == http.StatusTooManyRequests && ae.Problem.Code == "quota_exceeded":
					refused++
				default:
					t.Errorf("capped create: %v", r.err)
				}
			}
			if served != 1 || refused != 2 {
				t.Errorf("capped tenant: %d served, %d refused with quota_exceeded; want 1 and 2", served, refused)
			}
		})
	}
}

// rawAnswer is the status and problem of one raw call.
type rawAnswer struct {
	status       int
	code, detail string
}

// callRaw sends one request with key (and, for the terminal, the WebSocket
// upgrade headers) and reads the problem answer.
func callRaw(t *testing.T, s *service, key, method, path, body string) rawAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var rd io.Reader
	contentType := ""
	switch body {
	case "":
	case multipartMarker:
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		fw, err := mw.CreateFormFile("file", "pwned.txt")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = fw.Write([]byte("pwned"))
		_ = mw.Close()
		rd, contentType = &buf, mw.FormDataContentType()
	default:
		rd = strings.NewReader(body)
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	req, err := http.NewRequestWithContext(ctx, method, s.url()+path+sep+"path=secret.txt", rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if strings.HasSuffix(path, "/terminal") || strings.HasSuffix(path, "/attach") || strings.HasSuffix(path, "/tcp") {
		for k, v := range map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="} {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var p client.Problem
	_ = json.Unmarshal(b, &p)
	return rawAnswer{status: resp.StatusCode, code: p.Code, detail: p.Detail}
}

// crossTenantMCPAndSkills walks the MCP server and skill routes with
// another tenant's key: each answers as for an instance or skill that does
// not exist (404, or the idempotent 204 of a delete), and the owner's
// server and skill are unchanged afterwards. The Streamable HTTP endpoint
// takes an instance token, not a tenant key: there too the answer is the
// same as for a missing instance.
func crossTenantMCPAndSkills(t *testing.T, e *env, svc *service, otherKey string, routes []string) {
	e.requireImage(t, "tool-node")
	var s mcpServer
	if code, body := apiJSON(t, svc, "POST", "/v1/mcp/servers", map[string]any{"catalog": "everything"}, &s); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	t.Cleanup(func() { apiJSON(t, svc, "DELETE", "/v1/mcp/servers/"+s.ID, nil, nil) })
	if code, body := pushSkill(t, svc, skillArchive(t, reportSkill), "application/gzip", nil); code != 201 {
		t.Fatalf("push: %d %s", code, body)
	}
	bodies := map[string]string{
		"POST /v1/mcp/servers/{id}/pins/{tool}/approve":  `{"hash":"sha256:00"}`,
		"POST /v1/mcp/servers/{id}/approvals/{approval}": `{"decision":"approve","args_digest":"sha256:00"}`,
		"POST /v1/mcp/servers/{id}/mcp":                  `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		"POST /v1/skills/{name}/runs":                    `{"script":"scripts/report.py"}`,
	}
	walked := 0
	for _, route := range routes {
		method, path, _ := strings.Cut(route, " ")
		var own, missing string
		switch {
		case strings.HasPrefix(path, "/v1/mcp/servers/{id}"):
			own, missing = s.ID, "mcp_00000000000000000000"
		case strings.HasPrefix(path, "/v1/skills/{name}"):
			own, missing = "csv-report", "no-such-skill"
		default:
			continue
		}
		path = strings.NewReplacer("{tool}", "echo", "{approval}", "apr_00000000000000000000", "{revision}", "1",
			"{path}", "SKILL.md").Replace(path)
		walked++
		param := "{id}"
		if strings.Contains(path, "{name}") {
			param = "{name}"
		}
		foreign := callRaw(t, svc, otherKey, method, strings.Replace(path, param, own, 1), bodies[route])
		absent := callRaw(t, svc, otherKey, method, strings.Replace(path, param, missing, 1), bodies[route])
		want := http.StatusNotFound
		switch {
		case method == "DELETE" && strings.HasSuffix(path, "/mcp"):
			want = absent.status
		case method == "DELETE":
			want = http.StatusNoContent
		case strings.HasSuffix(path, "/mcp"):
			want = http.StatusUnauthorized // a tenant key is no instance token
		}
		if foreign.status != want || foreign.status != absent.status || foreign.code != absent.code {
			t.Errorf("%s with another tenant's key: %d %s %q; for a missing one: %d %s; want the same %d",
				route, foreign.status, foreign.code, foreign.detail, absent.status, absent.code, want)
		}
	}
	if walked < 12 {
		t.Fatalf("walked only %d MCP and skill routes", walked)
	}
	var got mcpServer
	if code, _ := apiJSON(t, svc, "GET", "/v1/mcp/servers/"+s.ID, nil, &got); code != 200 || got.State != "ready" {
		t.Errorf("the owner's MCP server after the walk: %d %+v", code, got)
	}
	if code, body := apiJSON(t, svc, "GET", "/v1/skills/csv-report", nil, nil); code != 200 {
		t.Errorf("the owner's skill after the walk: %d %s", code, body)
	}
}
