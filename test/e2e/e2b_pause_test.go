package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/testenv"
)

// TestE2BPauseResume drives the unmodified `e2b` npm SDK's pause, connect,
// lifecycle auto-pause, snapshots and fork through /e2b under runc and
// runsc (flows "pause", "autopause" and "snapshot" of
// test/e2bclient/flow.mjs).
//
//   - pause: the sandbox reads paused (getInfo, the list by state,
//     isRunning false, a second pause answers false), its container is
//     gone (a hibernation, in its trace); connect resumes it: a command
//     runs and the file written before the pause is there. Under runsc a
//     counter a background command kept goes on from where it was (its
//     process and memory kept); under runc the files come back and the
//     process does not.
//   - pausecode: the code interpreter's x = 41 is still there after pause
//     and connect under runsc; under runc the kernel starts afresh
//     (NameError).
//   - autopause: a sandbox created with lifecycle onTimeout "pause" and
//     autoResume reads paused after its timeout, and a command wakes it.
//   - snapshot: createSnapshot, listSnapshots, Sandbox.create(snapshotId)
//     with the snapshot's files, fork ×2 (each copy has them and diverges
//     on its own), deleteSnapshot.
func TestE2BPauseResume(t *testing.T) {
	t.Parallel()
	root := testenv.ModuleRoot(t)
	if _, err := os.Stat(filepath.Join(root, "test", "e2bclient", "node_modules", "e2b")); err != nil {
		t.Fatalf("the E2B SDK is not installed (make test-deps): %v", err)
	}
	untrusted := "e2e_" + randomHex(t, 16)
	e := newEnv(t, e2bConfig(untrusted)+"intervals:\n  reconcile: 1s\n")
	e.requireImage(t, "tool-basic")
	e.requireImage(t, "code-python-data")
	svc := e.start(t)
	keys := map[string]string{"runc": "e2b_" + e.apiKey, "runsc": untrusted}
	clients := map[string]*client.Client{"runc": svc.client(), "runsc": client.New(svc.url(), untrusted)}
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			t.Run("pause", func(t *testing.T) {
				t.Parallel()
				out := runE2BFlow(t, svc.url(), keys[rt], "pause")
				id, _ := out["id"].(string)
				want := map[string]any{
					"paused":              true,
					"stateAfterPause":     "paused",
					"listedPaused":        []any{id + ":paused"},
					"listedRunning":       []any{},
					"runningWhilePaused":  false,
					"pauseAgain":          false,
					"stateAfterConnect":   "running",
					"runningAfterConnect": true,
					"read":                "written before the pause",
					"cat":                 "written before the pause",
					"killed":              true,
				}
				for k, v := range want {
					if got := out[k]; fmt.Sprint(got) != fmt.Sprint(v) {
						t.Errorf("%s: got %#v, want %#v", k, got, v)
					}
				}
				before, _ := out["before"].(float64)
				after, _ := out["afterConnect"].(float64)
				later, _ := out["later"].(float64)
				ranMs, _ := out["ranMs"].(float64)
				if rt == "runsc" {
					// The process and its memory were kept: the counter goes on
					// from where it was, not from 1 and not through the six
					// seconds the sandbox slept, and still counts. It adds at
					// most one a second while it runs: ranMs, the time from
					// its first read to the pause's answer and from the
					// connect to the second read; plus one for a read on a
					// tick and one for the sleep under way at the pause.
					if limit := before + math.Floor(ranMs/1000) + 2; after < before || after > limit || later <= after {
						t.Errorf("the counter: %v at the pause, %v after connect (≤ %v: it ran at most %.0f ms), %v 3 s later; want it to go on from where it was", before, after, limit, ranMs, later)
					}
				} else if after < before || later != after {
					// Files only: the counter's last value is there, its
					// process is not.
					t.Errorf("the counter: %v at the pause, %v after connect, %v 3 s later; want the file kept and no process writing it", before, after, later)
				}
				// The pause was a hibernation and connect a wake.
				page, err := clients[rt].TracePage(callCtx(t), id, 0, 500)
				if err != nil {
					t.Fatal(err)
				}
				kinds := map[string]bool{}
				for _, ev := range page.Events {
					kinds[ev.Kind] = true
				}
				if !kinds["sandbox.hibernated"] || !kinds["sandbox.woken"] {
					t.Errorf("the trace lacks the hibernation or the wake: %v", kinds)
				}
				t.Logf("%s: pause %.0f ms, connect (wake) %.0f ms", rt, out["pauseMs"], out["connectMs"])
			})
			t.Run("pausecode", func(t *testing.T) {
				t.Parallel()
				out := runE2BFlow(t, svc.url(), keys[rt], "pausecode")
				after := map[string]any{"runsc": "42", "runc": map[string]any{"name": "NameError"}}[rt]
				want := map[string]any{"set": "41", "paused": true, "after": after, "killed": true}
				for k, v := range want {
					if got := out[k]; fmt.Sprint(got) != fmt.Sprint(v) {
						t.Errorf("%s: got %#v, want %#v", k, got, v)
					}
				}
			})
			t.Run("autopause", func(t *testing.T) {
				t.Parallel()
				out := runE2BFlow(t, svc.url(), keys[rt], "autopause")
				want := map[string]any{
					"lifecycle":     map[string]any{"onTimeout": "pause", "autoResume": true},
					"state":         "paused",
					"run":           "before the timeout",
					"stateAfterRun": "running",
					"killed":        true,
				}
				for k, v := range want {
					if got := out[k]; fmt.Sprint(got) != fmt.Sprint(v) {
						t.Errorf("%s: got %#v, want %#v", k, got, v)
					}
				}
				t.Logf("%s: paused %.0f ms after the 5 s timeout began to be watched", rt, out["pausedAfterMs"])
			})
			t.Run("snapshot", func(t *testing.T) {
				t.Parallel()
				out := runE2BFlow(t, svc.url(), keys[rt], "snapshot")
				snap, _ := out["snapshotId"].(string)
				if !strings.HasPrefix(snap, "snap_") {
					t.Fatalf("createSnapshot: %#v", out)
				}
				want := map[string]any{
					"names":           []any{"e2b-flow"},
					"runsOn":          "in the snapshot",
					"listed":          []any{snap},
					"made":            "in the snapshot",
					"madeTemplate":    snap,
					"madeKilled":      true,
					"parentAfterFork": "changed after the snapshot\nno-own\n",
					"deleted":         true,
					"deletedAgain":    false,
					"killed":          true,
				}
				for k, v := range want {
					if got := out[k]; fmt.Sprint(got) != fmt.Sprint(v) {
						t.Errorf("%s: got %#v, want %#v", k, got, v)
					}
				}
				forks, _ := out["forks"].([]any)
				if len(forks) != 2 {
					t.Fatalf("fork ×2: %#v", out["forks"])
				}
				seen := map[string]bool{}
				for _, f := range forks {
					m, _ := f.(map[string]any)
					fid, _ := m["id"].(string)
					if fid == "" || seen[fid] || m["out"] != "changed after the snapshot\n"+fid+"\n" {
						t.Errorf("a fork: %#v", f)
					}
					seen[fid] = true
				}
				if sb, err := clients[rt].GetSandbox(callCtx(t), out["madeId"].(string)); err != nil || string(sb.Runtime) != rt {
					t.Errorf("the sandbox from the snapshot: %+v %v, want runtime %s", sb, err, rt)
				}
			})
		})
	}
}
