package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/testenv"
)

// TestOpenSandboxPauseResume drives the unmodified OpenSandbox npm SDK's
// pause and resume through /opensandbox under runc and runsc (flow "pause"
// of test/osclient/flow.mjs): after pause the sandbox reads Paused (getInfo,
// the list by state), its health check fails and a command is refused
// (409 SANDBOX_PAUSED); a second pause succeeds; resume (the SDK's, which
// connects again) brings it back Running, the file written before the
// pause is there, and a counter a background command kept goes on from
// where it was — a pause is a freeze, which keeps processes and memory
// under both runtimes, as OpenSandbox's Docker runtime does. A paused
// sandbox can be killed.
func TestOpenSandboxPauseResume(t *testing.T) {
	t.Parallel()
	root := testenv.ModuleRoot(t)
	if _, err := os.Stat(filepath.Join(root, "test", "osclient", "node_modules", "@alibaba-group", "opensandbox")); err != nil {
		t.Fatalf("the OpenSandbox SDK is not installed (make test-deps): %v", err)
	}
	untrusted := "e2e_" + randomHex(t, 16)
	e := newEnv(t, openSandboxConfig(untrusted))
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	keys := map[string]string{"runc": e.apiKey, "runsc": untrusted}
	clients := map[string]*client.Client{"runc": svc.client(), "runsc": client.New(svc.url(), untrusted)}
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			out := runOpenSandboxFlow(t, svc.url(), keys[rt], "ubuntu", "pause")
			id, _ := out["id"].(string)
			want := map[string]any{
				"stateAfterPause":    "Paused",
				"listedPaused":       []any{id + ":Paused"},
				"listedRunning":      []any{},
				"healthyWhilePaused": false,
				"stateAfterResume":   "Running",
				"healthyAfterResume": true,
				"read":               "written before the pause",
				"cat":                []any{"written before the pause"},
				"afterKill":          "Terminated",
			}
			for k, v := range want {
				if got := out[k]; fmt.Sprint(got) != fmt.Sprint(v) {
					t.Errorf("%s: got %#v, want %#v", k, got, v)
				}
			}
			if e, _ := out["runWhilePaused"].(map[string]any); e["status"] != float64(409) || e["code"] != "SANDBOX_PAUSED" {
				t.Errorf("a command while paused: %#v, want 409 SANDBOX_PAUSED", out["runWhilePaused"])
			}
			before, _ := out["before"].(float64)
			after, _ := out["afterResume"].(float64)
			later, _ := out["later"].(float64)
			// The counter adds at most one a second while it runs: ranMs,
			// the time from its first read to the pause's answer and from
			// the resume to the second read (not the sleep between); plus
			// one for a read on a tick and one for the sleep under way at
			// the pause, which may end at once after it.
			ranMs, _ := out["ranMs"].(float64)
			if limit := before + math.Floor(ranMs/1000) + 2; after < before || after > limit || later <= after {
				t.Errorf("the counter: %v at the pause, %v after resume (≤ %v: it ran at most %.0f ms), %v 3 s later; want it frozen and then going on", before, after, limit, ranMs, later)
			}
			page, err := clients[rt].TracePage(callCtx(t), id, 0, 500)
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string]bool{}
			for _, ev := range page.Events {
				kinds[ev.Kind] = true
			}
			if !kinds["sandbox.paused"] || !kinds["sandbox.resumed"] {
				t.Errorf("the trace lacks the pause or the resume: %v", kinds)
			}
			if sb, err := clients[rt].GetSandbox(callCtx(t), id); err != nil || sb.Runtime != rt || sb.State != "destroyed" {
				t.Errorf("the sandbox after the flow: %+v %v; want destroyed, under %s", sb, err, rt)
			}
			t.Logf("%s: pause %.0f ms, resume %.0f ms, kill of a paused sandbox %.0f ms", rt, out["pauseMs"], out["resumeMs"], out["killPausedMs"])
		})
	}
}
