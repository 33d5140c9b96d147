package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/testenv"
)

// TestCompatWarmStartAndFiles drives the unmodified E2B and OpenSandbox
// SDKs against sandboxes handed out warm from a pool, under runc and runsc
// (a tenant whose policy puts everything under runsc): the sandbox's
// startedAt (E2B) and createdAt (OpenSandbox), in get and list, is the
// time of the SDK's create, not the older birth of the pool member; files
// go to /tmp and the sandbox user's home (the default file roots) and
// come back through the SDK and a command, while /etc, /proc and the
// agent's socket stay refused. The OpenSandbox image is a profile's name.
func TestCompatWarmStartAndFiles(t *testing.T) {
	t.Parallel()
	root := testenv.ModuleRoot(t)
	for _, dep := range []string{"test/e2bclient/node_modules/e2b", "test/osclient/node_modules/@alibaba-group/opensandbox"} {
		if _, err := os.Stat(filepath.Join(root, dep)); err != nil {
			t.Fatalf("the SDKs are not installed (make test-deps): %v", err)
		}
	}
	untrusted := "e2e_" + randomHex(t, 16)
	cfg := strings.Replace(openSandboxConfig(untrusted), "    lease: {default_ttl_seconds: 300, max_ttl_seconds: 3600}\n",
		"    lease: {default_ttl_seconds: 300, max_ttl_seconds: 3600}\n"+
			"    pools: [{runtime: runc, min_idle: 1, max_total: 2}, {runtime: runsc, min_idle: 1, max_total: 2}]\n", 1)
	e := newEnv(t, "warm_pools: true\nintervals: {pool_check: 1s}\n"+cfg)
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	keys := map[string]string{"runc": e.apiKey, "runsc": untrusted}
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			owner := client.New(svc.url(), keys[rt]) // the tenant the SDK acts for
			// warm waits for an idle member of the runtime's pool and
			// answers when the oldest idle one was made, the one a claim takes.
			warm := func() {
				t.Helper()
				eventually(t, 90*time.Second, "an idle tool-basic member under "+rt, func() (bool, string) {
					pools, err := svc.client().Pools(callCtx(t))
					if err != nil {
						return false, err.Error()
					}
					for _, p := range pools.Items {
						if p.Profile == "tool-basic" && p.Runtime == rt && p.Counts["idle"] > 0 {
							return true, ""
						}
					}
					return false, fmt.Sprintf("%+v", pools.Items)
				})
			}
			// started checks that the SDK's time of sandbox id lies within its
			// create call, and that the sandbox itself is older: a warm member.
			started := func(what, id string, before, after, got float64) {
				t.Helper()
				if got < before || got > after {
					t.Errorf("%s %s: %.0f, want the create's time in [%.0f, %.0f]", what, id, got, before, after)
				}
				sb, err := owner.GetSandbox(callCtx(t), id)
				if err != nil {
					t.Fatal(err)
				}
				if born := float64(sb.CreatedAt.UnixMilli()); born >= before {
					t.Errorf("sandbox %s was made at %.0f, during the create (from %.0f): not a warm member, so this proves nothing", id, born, before)
				}
			}
			files := func(out map[string]any, tmpList, cat any, refused func(v any) bool) {
				t.Helper()
				home, _ := out["home"].(string)
				if home != "/home/sandbox" {
					t.Errorf("$HOME %q, want /home/sandbox", home)
				}
				want := map[string]any{"tmpRead": "in tmp", "homeRead": "in home", "tmpList": tmpList, "cat": cat}
				for k, v := range want {
					if got := out[k]; fmt.Sprint(got) != fmt.Sprint(v) {
						t.Errorf("%s: got %#v, want %#v", k, got, v)
					}
				}
				for _, k := range []string{"etc", "proc", "agent"} {
					if !refused(out[k]) {
						t.Errorf("reading the %s path: %v, want refused", k, out[k])
					}
				}
			}

			warm()
			out := runE2BNode(t, "warm", nil, "E2B_API_URL="+svc.url()+"/e2b", "E2B_SANDBOX_URL="+svc.url()+"/e2b", "E2B_API_KEY="+keys[rt], "E2B_DOMAIN=")
			id, _ := out["id"].(string)
			before, _ := out["before"].(float64)
			after, _ := out["after"].(float64)
			startedAt, _ := out["startedAt"].(float64)
			listed, _ := out["listedStartedAt"].(float64)
			started("e2b getInfo startedAt", id, before, after, startedAt)
			started("e2b list startedAt", id, before, after, listed)
			files(out, []any{"a.txt:file"}, "in tmpin home", func(v any) bool { return v != "read" && v != nil })
			if out["killed"] != true {
				t.Errorf("kill: %v", out["killed"])
			}

			warm()
			out = runOpenSandboxFlow(t, svc.url(), keys[rt], "tool-basic", "warm")
			id, _ = out["id"].(string)
			before, _ = out["before"].(float64)
			after, _ = out["after"].(float64)
			createdAt, _ := out["createdAt"].(float64)
			listed, _ = out["listedCreatedAt"].(float64)
			started("opensandbox getInfo createdAt", id, before, after, createdAt)
			started("opensandbox list createdAt", id, before, after, listed)
			if sb, err := owner.GetSandbox(callCtx(t), id); err != nil || sb.Profile != "tool-basic" {
				t.Errorf("the image tool-basic made %+v, %v", sb, err)
			}
			files(out, []any{"/tmp/os/a.txt:file"}, []any{"in tmp", "in home"}, func(v any) bool { return v == float64(400) })
		})
	}
}
