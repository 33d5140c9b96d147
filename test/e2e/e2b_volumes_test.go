package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/testenv"
)

// TestE2BVolumes drives the unmodified `e2b` SDK's Volume class and a
// create's volumeMounts through /e2b under runc and runsc: a volume made
// with Volume.create is listed and found by its id, seeded and read through
// the volume content API with its token (vol.writeFile, readFile, makeDir,
// list, getInfo, exists, updateMetadata, remove; a path leaving it, a
// wrong token and a write beside a mounted writer refused), mounted into a sandbox
// that writes to it (Volume.destroy is refused while it is mounted), read
// by a second sandbox after the first is gone, then destroyed (a second
// destroy answers false; getInfo then throws VolumeNotFoundError). The
// volume is this service's named volume: /v1/volumes shows it while it
// lives. GET /v1/capabilities advertises volumes.
func TestE2BVolumes(t *testing.T) {
	t.Parallel()
	root := testenv.ModuleRoot(t)
	if _, err := os.Stat(filepath.Join(root, "test", "e2bclient", "node_modules", "e2b")); err != nil {
		t.Fatalf("the E2B SDK is not installed (make test-deps): %v", err)
	}
	untrusted := "e2e_" + randomHex(t, 16)
	e := newEnv(t, e2bConfig(untrusted))
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	if _, err := svc.client().ListVolumes(callCtx(t)); err != nil {
		var ae *client.APIError
		if errors.As(err, &ae) && ae.Status == http.StatusNotImplemented && os.Getenv("CI") != "true" {
			t.Skipf("volumes unavailable on this host: %v", err)
		}
		t.Fatal(err)
	}
	// GET /v1/capabilities advertises them: supported here, the default
	// roots and limits.
	caps, err := svc.client().Capabilities(callCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if v := caps.Volumes; !v.Supported || v.Reason != "" || !reflect.DeepEqual(v.Roots, []string{"/workspace", "/mnt"}) || v.MaxSizeMB != 100<<10 || v.MaxMBPerTenant != 200<<10 || v.MaxPerTenant != 100 {
		t.Errorf("capabilities volumes = %+v, want supported, roots /workspace and /mnt, the default limits", v)
	}
	// A volume's content token opens that volume only: not another volume
	// of the same tenant, not the same volume as a sandbox; none is 401.
	t.Run("token scope", func(t *testing.T) {
		toks := map[string]string{}
		ids := map[string]string{}
		for _, n := range []string{"scope-a", "scope-b"} {
			code, body := e2bCall(t, svc.url(), e.apiKey, "POST", "/e2b/volumes", `{"name":"`+n+`"}`)
			var v struct{ VolumeID, Token string }
			if code != 201 || json.Unmarshal([]byte(body), &v) != nil || v.Token == "" {
				t.Fatalf("create %s: %d %s", n, code, body)
			}
			toks[n], ids[n] = v.Token, v.VolumeID
			t.Cleanup(func() { e2bCall(t, svc.url(), e.apiKey, "DELETE", "/e2b/volumes/"+v.VolumeID, "") })
		}
		stat := func(id, token string) int {
			code, _ := e2bRequest(t, "GET", svc.url()+"/e2b/volumecontent/"+id+"/path?path=/", "", map[string]string{"Authorization": "Bearer " + token})
			return code
		}
		if c := stat(ids["scope-a"], toks["scope-a"]); c != 200 {
			t.Errorf("a volume's own token: %d, want 200", c)
		}
		if c := stat(ids["scope-b"], toks["scope-a"]); c != 401 {
			t.Errorf("another volume's token: %d, want 401", c)
		}
		if c := stat(ids["scope-a"], ""); c != 401 {
			t.Errorf("no token: %d, want 401", c)
		}
		if code, _ := e2bRequest(t, "GET", svc.url()+"/e2b/health", "", map[string]string{"E2b-Sandbox-Id": "volume:" + ids["scope-a"], "X-Access-Token": toks["scope-a"]}); code == 200 || code == 204 {
			t.Errorf("a volume's token as a sandbox's: %d, want a refusal", code)
		}
	})
	keys := map[string]string{"runc": "e2b_" + e.apiKey, "runsc": untrusted}
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			name := "e2b-" + rt
			out := runE2BNode(t, "volumes", nil, "E2B_API_URL="+svc.url()+"/e2b", "E2B_SANDBOX_URL="+svc.url()+"/e2b",
				"E2B_VOLUME_API_URL="+svc.url()+"/e2b", "E2B_API_KEY="+keys[rt], "E2B_DOMAIN=", "FLOW_VOLUME="+name)
			id, _ := out["volumeId"].(string)
			if id == "" || out["volumeName"] != name {
				t.Fatalf("Volume.create: id %q name %v, want a volume %q", id, out["volumeName"], name)
			}
			want := map[string]any{
				"listed":         []any{name + ":" + id},
				"info":           map[string]any{"volumeId": id, "name": name},
				"tokenShape":     "gst_v2",
				"contentWrite":   map[string]any{"path": "/seed/hello.txt", "type": "file", "size": float64(13)},
				"contentRead":    "from the sdk\n",
				"contentBytes":   float64(13),
				"contentMakeDir": "directory",
				"contentList":    []any{"directory:/made", "directory:/made/deep", "directory:/seed", "file:/seed/hello.txt"},
				"contentInfo":    map[string]any{"name": "hello.txt", "type": "file", "size": float64(13), "mtimeIsDate": true},
				"contentExists":  []any{true, false},
				"contentMode":    float64(0o640),
				"contentMissing": "VolumePathNotFoundError",
				"seenInside":     "from the sdk\n640\n",
				"readNote":       "kept\n",
				"removed":        false,
				"mounts":         []any{map[string]any{"name": name, "path": "/mnt/data"}},
				"write":          "kept\n",
				"read":           "kept\n",
				"destroyed":      true,
				"destroyedAgain": false,
				"gone":           "VolumeNotFoundError",
			}
			for k, status := range map[string]string{"contentEscape": "400", "writeWhileMounted": "409"} {
				if got, _ := out[k].(map[string]any); got == nil || got["name"] != "VolumeError" || !strings.Contains(fmt.Sprint(got["message"]), status) {
					t.Errorf("%s: %v, want a VolumeError (%s)", k, out[k], status)
				}
			}
			if got, _ := out["contentBadToken"].(map[string]any); got == nil || got["name"] != "AuthenticationError" {
				t.Errorf("a wrong volume token: %v, want an AuthenticationError (401)", out["contentBadToken"])
			}
			if got, _ := out["destroyWhileMounted"].(map[string]any); got["name"] != "VolumeError" || !strings.Contains(got["message"].(string), "409") {
				t.Errorf("Volume.destroy while mounted: %v, want a VolumeError (409)", out["destroyWhileMounted"])
			}
			for k, w := range want {
				if !reflect.DeepEqual(out[k], w) {
					t.Errorf("%s = %#v, want %#v", k, out[k], w)
				}
			}
			if out["readerId"] == out["writerId"] {
				t.Errorf("the reader is the writer's sandbox %v", out["writerId"])
			}
			// Both sandboxes are gone: no holds remain, and the volume is
			// gone from /v1/volumes too.
			c := svc.client()
			if rt == "runsc" {
				c = client.New(svc.url(), untrusted)
			}
			if _, err := c.GetVolume(callCtx(t), name); err == nil {
				t.Errorf("volume %s still in /v1/volumes after Volume.destroy", name)
			}
		})
	}
}
