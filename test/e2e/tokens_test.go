package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"genesis.dev/sandbox/client"
)

// dataPlaneTokens are the tokens one API key was given for one sandbox of
// each kind: an E2B access token and an OpenSandbox execd token (of an
// E2B sandbox), a preview link to its port 8001, and a live-view link of
// a desktop.
type dataPlaneTokens struct {
	e2b, osb, preview, display string
}

// TestTokensDieWithTheirKey: under runc and runsc, an E2B access token, an
// OpenSandbox endpoint token, a preview link and a display link, each made
// with a key created through the tenant API, stop working (401
// token_revoked) as soon as that key is revoked through the tenant API,
// while the same operations with the tokens of another live key of the
// same tenant keep working.
func TestTokensDieWithTheirKey(t *testing.T) {
	t.Parallel()
	adminKey := "e2e-admin-" + randomHex(t, 12)
	e := newEnv(t, "admin_api_key: "+adminKey+"\n")
	e.requireImage(t, "tool-basic")
	e.requireImage(t, "desktop-vnc")
	svc := e.start(t)
	admin := client.New(svc.url(), adminKey)
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			// A tenant of the API whose policy picks the runtime: its
			// sandboxes are low risk (runc) or, with min_risk_level high,
			// run under runsc.
			tenant := client.CreateTenantRequest{Name: "tokens-" + rt}
			if rt == "runsc" {
				tenant.MinRiskLevel = "high"
			}
			if _, err := admin.CreateTenant(callCtx(t), tenant); err != nil {
				t.Fatal(err)
			}
			newKey := func(what string) *client.APIKey {
				k, err := admin.CreateAPIKey(callCtx(t), tenant.Name, client.CreateAPIKeyRequest{Description: what})
				if err != nil {
					t.Fatal(err)
				}
				return k
			}
			doomedKey, keptKey := newKey("doomed"), newKey("kept")
			doomed, kept := client.New(svc.url(), doomedKey.Key), client.New(svc.url(), keptKey.Key)

			// An E2B sandbox made with the doomed key (deleted with the
			// kept one), serving "ok" on port 8001.
			code, body := e2bCall(t, svc.url(), doomedKey.Key, "POST", "/e2b/v2/sandboxes", `{"templateID":"base","timeout":900}`)
			if code != 201 {
				t.Fatalf("E2B create: %d %s", code, body)
			}
			var made struct{ SandboxID, EnvdAccessToken string }
			if err := json.Unmarshal([]byte(body), &made); err != nil {
				t.Fatal(err)
			}
			id := made.SandboxID
			t.Cleanup(func() { e2bCall(t, svc.url(), keptKey.Key, "DELETE", "/e2b/sandboxes/"+id, "") })
			if sb, err := kept.GetSandbox(callCtx(t), id); err != nil || sb.Runtime != rt {
				t.Fatalf("the E2B sandbox: %+v %v, want runtime %s", sb, err, rt)
			}
			uploadSandboxServer(t, doomed, id)
			startJob(t, doomed, id, client.ExecRequest{Command: []string{"/workspace/sbserver", "wsecho", "-addr", "127.0.0.1:8001"}})
			eventually(t, 30*time.Second, "the sandbox's server", func() (bool, string) {
				code, _, body := apiGet(t, svc, "/v1/sandboxes/"+id+"/ports/8001/", keptKey.Key)
				return code == 200, fmt.Sprintf("%d %.200s", code, body)
			})

			// A desktop made with the doomed key.
			dreq := client.CreateSandboxRequest{Profile: "desktop-vnc", Runtime: rt}
			if rt == "runc" {
				dreq.RiskLevel = "low" // the profile's default (high) runs under runsc only
			}
			desk, err := doomed.CreateSandbox(callCtx(t), dreq, "")
			if err != nil {
				t.Fatalf("desktop: %v", err)
			}
			t.Cleanup(func() { kept.DeleteSandbox(callCtx(t), desk.ID) })

			tokensOf := func(c *client.Client, key, firstE2B string) dataPlaneTokens {
				var tok dataPlaneTokens
				tok.e2b = firstE2B
				if tok.e2b == "" {
					code, body := e2bCall(t, svc.url(), key, "GET", "/e2b/sandboxes/"+id, "")
					var d struct{ EnvdAccessToken string }
					if code != 200 || json.Unmarshal([]byte(body), &d) != nil || d.EnvdAccessToken == "" {
						t.Fatalf("E2B get: %d %s", code, body)
					}
					tok.e2b = d.EnvdAccessToken
				}
				code, body := e2bRequest(t, "GET", svc.url()+"/opensandbox/v1/sandboxes/"+id+"/endpoints/44772", "", map[string]string{"OPEN-SANDBOX-API-KEY": key})
				var ep struct{ Headers map[string]string }
				if code != 200 || json.Unmarshal([]byte(body), &ep) != nil || ep.Headers["X-Genesis-Sandbox-Token"] == "" {
					t.Fatalf("OpenSandbox endpoint: %d %s", code, body)
				}
				tok.osb = ep.Headers["X-Genesis-Sandbox-Token"]
				link, err := c.CreatePortLink(callCtx(t), id, 8001, 30*time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				tok.preview = link.URL
				dl, err := c.CreateDisplayLink(callCtx(t), desk.ID, "observer", 30*time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				tok.display = strings.TrimSuffix(strings.TrimPrefix(dl.ViewerURL, svc.url()), "/viewer")
				return tok
			}
			doomedTok := tokensOf(doomed, doomedKey.Key, made.EnvdAccessToken)
			keptTok := tokensOf(kept, keptKey.Key, "")

			// use runs one operation with each token and answers, per
			// token, the status and the body.
			use := func(tok dataPlaneTokens) map[string][2]string {
				out := map[string][2]string{}
				note := func(name string, code int, body string) { out[name] = [2]string{fmt.Sprint(code), body} }
				code, body := e2bRequest(t, "GET", svc.url()+"/e2b/ports/8001/", "", map[string]string{"E2b-Sandbox-Id": id, "X-Access-Token": tok.e2b})
				note("e2b port traffic", code, body)
				code, body = sandboxCall(t, svc.url(), tok.e2b, id, "GET", "/e2b/health", "")
				note("e2b health", code, body)
				code, evs := osEvents(t, svc.url()+"/opensandbox/sandboxes/"+id+"/execd/command", tok.osb, `{"command":"echo ran-by-token"}`)
				note("opensandbox command", code, fmt.Sprint(evs))
				code, _, body = previewDo(t, svc, "GET", tok.preview, nil)
				note("preview link", code, body)
				code, _, body = apiGet(t, svc, tok.display+"/control", "")
				note("display link's control", code, body)
				code, _, body = apiGet(t, svc, tok.display+"/viewer", "")
				note("display link's page", code, body)
				code, body = vncGreeting(t, svc.url()+tok.display+"/vnc")
				note("display link's VNC", code, body)
				return out
			}
			works := func(what string, tok dataPlaneTokens) {
				t.Helper()
				got := use(tok)
				for op, want := range map[string]string{
					"e2b port traffic": "200", "e2b health": "204", "opensandbox command": "200",
					"preview link": "200", "display link's control": "200", "display link's page": "200",
					"display link's VNC": "101",
				} {
					if got[op][0] != want {
						t.Errorf("%s: %s: %s %.300s, want %s", what, op, got[op][0], got[op][1], want)
					}
				}
				if !strings.Contains(got["opensandbox command"][1], "ran-by-token") || !strings.HasPrefix(got["preview link"][1], "ok GET /") ||
					!strings.HasPrefix(got["display link's VNC"][1], "RFB ") {
					t.Errorf("%s: the command, the page or the live view did not run: %q %q %q", what,
						got["opensandbox command"][1], got["preview link"][1], got["display link's VNC"][1])
				}
			}
			works("before the revocation, the doomed key's tokens", doomedTok)
			works("before the revocation, the kept key's tokens", keptTok)

			if err := admin.RevokeAPIKey(callCtx(t), tenant.Name, doomedKey.ID); err != nil {
				t.Fatal(err)
			}
			// The revoked key itself is refused, and so is every token it made,
			// at once (the revocation went through this instance).
			if _, err := doomed.GetSandbox(callCtx(t), id); client.ErrorCode(err) != "unauthenticated" {
				t.Errorf("the revoked key: %v", err)
			}
			got := use(doomedTok)
			for op, r := range got {
				code, body := r[0], r[1]
				ok := code == "401"
				switch op {
				case "e2b port traffic", "e2b health":
					ok = ok && strings.Contains(body, `"code":401`) && strings.Contains(body, "revoked")
				case "opensandbox command":
					ok = ok && strings.Contains(body, "TOKEN_REVOKED")
				default:
					ok = ok && strings.Contains(body, `"code":"token_revoked"`)
				}
				if !ok {
					t.Errorf("after the revocation, the doomed key's %s: %s %.300s, want 401 token_revoked", op, code, body)
				}
			}
			if strings.Contains(fmt.Sprint(got), "ran-by-token") {
				t.Error("a command ran with a revoked key's token")
			}
			works("after the revocation, the kept key's tokens", keptTok)

		})
	}
}

// vncGreeting opens a live view's RFB WebSocket and answers the HTTP
// status of the upgrade and the server's first bytes (the RFB version), or
// the refusal's body.
func vncGreeting(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http"), &websocket.DialOptions{Subprotocols: []string{"binary"}})
	if err != nil {
		if resp == nil {
			t.Fatalf("live view %s: %v", url, err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	defer ws.CloseNow()
	_, b, err := ws.Read(ctx)
	if err != nil {
		return http.StatusSwitchingProtocols, "no greeting: " + err.Error()
	}
	return http.StatusSwitchingProtocols, string(b)
}
