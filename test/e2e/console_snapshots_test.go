package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"genesis.dev/sandbox/client"
)

// TestConsoleSnapshots drives a sandbox's saved state through the console
// in one Chromium (chromedp) against one service, under runc and runsc:
// Pause (the page says paused; a command is refused with sandbox_paused),
// Resume, Hibernate and Resume again (woken with its memory under runsc,
// its files only under runc), Take snapshot, the Snapshots view (from the
// navigation, newest first, linking the sandbox), Fork…, Roll back… (the
// workspace returns, and under runsc a process started before the
// snapshot lives again), a new sandbox from the snapshot, and its delete.
func TestConsoleSnapshots(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	requireConsoleBuilt(t, svc)
	c := svc.client()
	t.Cleanup(func() {
		// Snapshots left by a failed step go before the service stops (a
		// runc snapshot's committed image with them).
		list, _ := c.ListSnapshots(callCtx(t), "")
		for _, sn := range list {
			_ = c.DeleteSnapshot(callCtx(t), sn.ID)
		}
	})
	b := newConsoleBrowser(t)
	user := b.tab(t, "tenant", svc.url())
	user.signIn(t, e.apiKey)
	// The console asks before a delete or a rollback: yes.
	user.eval(t, `(window.confirm = () => true, true)`, nil)

	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			rtT := t // the sandboxes the steps make live to the end of the runtime's steps
			shots := consoleArtifacts(t, "snapshots-"+rt)
			memory := rt == "runsc" // runc keeps files only
			kept := "with its files only"
			if memory {
				kept = "with its processes and memory"
			}
			req := client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt}
			if rt == "runc" {
				req.RiskLevel = "low"
			}
			sb := e.createSandbox(t, req)
			sh := func(script string) *client.ExecResult {
				t.Helper()
				res, err := c.Exec(callCtx(t), sb.ID, client.ExecRequest{Script: script})
				if err != nil {
					t.Fatalf("exec %q: %v", script, err)
				}
				return res
			}
			// A file, and a process the snapshot should hold (under runsc).
			// The process is known by its pid and its command line: a pid
			// alone may be another process's in a new container.
			const sleeperAlive = `p=$(cat /tmp/sleeper) && grep -q '^sleep' /proc/$p/cmdline`
			sh(`echo before > /workspace/mark`)
			if _, err := c.StartJob(callCtx(t), sb.ID, client.ExecRequest{Script: `echo $$ > /tmp/sleeper; exec sleep 100000`}); err != nil {
				t.Fatal(err)
			}
			eventually(t, callTimeout, "the sleeper", func() (bool, string) {
				res := sh(sleeperAlive)
				return res.ExitCode == 0, res.Stderr
			})
			click := func(what, selector string) {
				t.Helper()
				user.run(t, what, chromedp.Click(chromedp.CSS(selector)))
			}
			stateIs := func(state string) {
				t.Helper()
				user.wait(t, "the page to say "+state, `document.querySelector('#suspension[data-state=`+js(state)+`]')`)
				got, err := c.GetSandbox(callCtx(t), sb.ID)
				if err != nil || got.State != state {
					t.Fatalf("the API says %+v %v, want %s", got, err, state)
				}
			}
			said := func() string {
				t.Helper()
				var s string
				user.eval(t, `document.getElementById('state-msg')?.textContent ?? ''`, &s)
				return s
			}

			t.Run("pause", func(t *testing.T) {
				user.open(t, "/sandboxes/"+sb.ID)
				click("pause", `#state button[data-action="pause"]`)
				stateIs("paused")
				var suspended string
				user.eval(t, `document.getElementById('suspended').textContent`, &suspended)
				if !strings.HasPrefix(suspended, "paused since ") || !strings.HasSuffix(suspended, "its processes are frozen and its memory kept") {
					t.Errorf("the paused sandbox's page says %q", suspended)
				}
				// A command is refused, and the page says why.
				user.run(t, "run a command", chromedp.SendKeys(chromedp.CSS("#script"), "echo never"), chromedp.Click(chromedp.CSS(`#run button[type="submit"]`)))
				user.wait(t, "the refusal", `[...document.querySelectorAll('main .note.error')].some((n) => n.textContent.includes('(sandbox_paused)'))`)
				user.shot(t, shots, "paused")
				// Fork… and Roll back… ask first: their forms are hidden until then.
				var shown []string
				user.eval(t, `['fork-form', 'rollback-form'].filter((id) => document.getElementById(id).getClientRects().length > 0)`, &shown)
				if len(shown) > 0 {
					t.Errorf("forms shown before their buttons were clicked: %q", shown)
				}
				var disabled map[string]bool
				user.eval(t, `Object.fromEntries([...document.querySelectorAll('#state .actions button')].map((b) => [b.dataset.action, b.disabled]))`, &disabled)
				if !disabled["pause"] || disabled["resume"] || disabled["hibernate"] || disabled["snapshot"] {
					t.Errorf("a paused sandbox's buttons (disabled): %v", disabled)
				}
			})

			t.Run("resume", func(t *testing.T) {
				click("resume", `#state button[data-action="resume"]`)
				stateIs("ready")
				if s := said(); s != "Resumed." {
					t.Errorf("after Resume the page says %q", s)
				}
				if res := sh(`cat /workspace/mark`); res.Stdout != "before\n" {
					t.Errorf("after the resume: %+v", res)
				}
			})

			t.Run("hibernate and wake", func(t *testing.T) {
				click("hibernate", `#state button[data-action="hibernate"]`)
				stateIs("hibernated")
				var suspended string
				user.eval(t, `document.getElementById('suspended').textContent`, &suspended)
				want := "its files are kept on disk: it wakes with its files only"
				if memory {
					want = "its files, processes and memory are kept on disk: it wakes where it was"
				}
				if !strings.HasPrefix(suspended, "hibernated since ") || !strings.Contains(suspended, want) {
					t.Errorf("the hibernated sandbox's page says %q, want %q", suspended, want)
				}
				user.shot(t, shots, "hibernated")
				click("resume", `#state button[data-action="resume"]`)
				stateIs("ready")
				if s := said(); !strings.HasPrefix(s, "Woken "+kept) {
					t.Errorf("after waking the page says %q, want Woken %s", s, kept)
				}
			})

			var snapID string
			t.Run("take snapshot", func(t *testing.T) {
				if memory { // the sleeper lives on after the wake
					if res := sh(sleeperAlive); res.ExitCode != 0 {
						t.Errorf("the process did not survive the wake under runsc: %+v", res)
					}
				}
				user.open(t, "/sandboxes/"+sb.ID)
				t0 := time.Now()
				click("take snapshot", `#state button[data-action="snapshot"]`)
				user.wait(t, "the snapshot (or an error)", `document.getElementById('state-msg')?.textContent.startsWith('Snapshot snap_') ||
					document.querySelector('#state-msg .error')`)
				t.Logf("the snapshot took %v", time.Since(t0))
				list, err := c.ListSnapshots(callCtx(t), sb.ID)
				if err != nil || len(list) != 1 {
					t.Fatalf("the page says %q; the sandbox's snapshots: %+v %v", said(), list, err)
				}
				sn := list[0]
				snapID = sn.ID
				holds := "files only"
				if memory {
					holds = "files, processes and memory"
				}
				if s := said(); !strings.HasPrefix(s, "Snapshot "+sn.ID+" taken: "+holds+", ") || sn.Memory != memory || sn.State != "ready" {
					t.Errorf("the page says %q of snapshot %+v", s, sn)
				}
				user.wait(t, "the snapshot in the sandbox's list", `document.querySelector('#sandbox-snapshots tr[data-id=`+js(sn.ID)+`]')`)
				// What changes after the snapshot is what the rollback undoes.
				sh(`echo after > /workspace/mark; ` + sleeperAlive + ` && kill $p`)
			})
			if snapID == "" {
				t.FailNow()
			}

			t.Run("snapshots view", func(t *testing.T) {
				later, err := c.CreateSnapshot(callCtx(t), sb.ID, client.CreateSnapshotRequest{Name: "later", Memory: new(bool)})
				if err != nil {
					t.Fatal(err)
				}
				click("the navigation's Snapshots", `header nav a[href="#/snapshots"]`)
				user.wait(t, "the snapshots", `document.querySelector('tr[data-id=`+js(later.ID)+`]') && document.querySelector('tr[data-id=`+js(snapID)+`]')`)
				type row struct{ ID, Memory, Text, Sandbox string }
				var rows []row
				user.eval(t, `[...document.querySelectorAll('main tbody tr')].map((r) => ({id: r.dataset.id, memory: r.dataset.memory,
					text: r.textContent, sandbox: r.querySelector('a[href^="#/sandboxes/"]')?.getAttribute('href')}))`, &rows)
				ids := []string{}
				for _, r := range rows {
					ids = append(ids, r.ID)
				}
				if i, j := slices.Index(ids, later.ID), slices.Index(ids, snapID); i < 0 || j < 0 || i > j {
					t.Fatalf("listed %v: want %s (newer) before %s", ids, later.ID, snapID)
				}
				first := rows[slices.Index(ids, snapID)]
				if first.Sandbox != "#/sandboxes/"+sb.ID || first.Memory != fmt.Sprint(memory) || !strings.Contains(first.Text, rt) {
					t.Errorf("the snapshot's row: %+v", first)
				}
				if r := rows[slices.Index(ids, later.ID)]; r.Memory != "false" || !strings.Contains(r.Text, "later") || !strings.Contains(r.Text, "files only") {
					t.Errorf("the files-only snapshot's row: %+v", r)
				}
				user.shot(t, shots, "snapshots")
				click("delete the later one", `tr[data-id=`+js(later.ID)+`] button[data-action="delete"]`)
				user.wait(t, "the later one gone", `!document.querySelector('tr[data-id=`+js(later.ID)+`]') && document.querySelector('tr[data-id=`+js(snapID)+`]')`)
				if _, err := c.GetSnapshot(callCtx(t), later.ID); !isStatus(err, http.StatusNotFound, "") {
					t.Errorf("the deleted snapshot: %v", err)
				}
				// Its sandbox link goes to the sandbox's page.
				click("the sandbox link", `tr[data-id=`+js(snapID)+`] a[href^="#/sandboxes/"]`)
				user.wait(t, "the sandbox's page", `document.querySelector('#state') && location.hash === '#/sandboxes/' + `+js(sb.ID))
			})

			t.Run("fork", func(t *testing.T) {
				click("fork", `#state button[data-action="fork"]`)
				user.wait(t, "the fork form", `document.getElementById('fork-form').getClientRects().length > 0`)
				user.run(t, "two copies", chromedp.SetValue(chromedp.CSS("#fork-count"), "2"), chromedp.Click(chromedp.CSS("#fork-submit")))
				user.wait(t, "the copies", `document.querySelectorAll('#fork-made li[data-id]').length === 2`)
				var made []struct{ ID, Memory string }
				user.eval(t, `[...document.querySelectorAll('#fork-made li[data-id]')].map((l) => ({id: l.dataset.id, memory: l.dataset.memory}))`, &made)
				for _, m := range made {
					e.deleteOnCleanup(rtT, m.ID)
					if m.Memory != fmt.Sprint(memory) {
						t.Errorf("copy %s: memory restored %s, want %v", m.ID, m.Memory, memory)
					}
					res, err := c.Exec(callCtx(t), m.ID, client.ExecRequest{Script: `cat /workspace/mark`})
					if err != nil || res.Stdout != "after\n" {
						t.Errorf("copy %s's workspace: %+v %v", m.ID, res, err)
					}
				}
				user.shot(t, shots, "forked")
			})

			t.Run("roll back", func(t *testing.T) {
				user.open(t, "/sandboxes/"+sb.ID)
				click("roll back…", `#state button[data-action="rollback"]`)
				user.wait(t, "the rollback form", `document.getElementById('rollback-form').getClientRects().length > 0`)
				user.run(t, "choose the snapshot", chromedp.SetValue(chromedp.CSS("#rollback-snapshot"), snapID), chromedp.Click(chromedp.CSS("#rollback-submit")))
				user.wait(t, "the rollback (or an error)", `document.getElementById('state-msg')?.textContent.startsWith('Rolled back') ||
					document.querySelector('#state-msg .error')`)
				if s, want := said(), "Rolled back to snapshot "+snapID+" "+kept; !strings.HasPrefix(s, want) {
					t.Errorf("after the rollback the page says %q, want %q", s, want)
				}
				if res := sh(`cat /workspace/mark`); res.Stdout != "before\n" {
					t.Errorf("the workspace after the rollback: %+v", res)
				}
				// Under runsc the process killed after the snapshot lives again.
				if res := sh(sleeperAlive); (res.ExitCode == 0) != memory {
					t.Errorf("the sleeper after the rollback (memory %v): %+v", memory, res)
				}
				user.shot(t, shots, "rolled-back")
			})

			var fromSnap string
			t.Run("new sandbox from it", func(t *testing.T) {
				user.open(t, "/snapshots")
				click("new sandbox", `tr[data-id=`+js(snapID)+`] button[data-action="new-sandbox"]`)
				user.wait(t, "the new sandbox's page", `location.hash.startsWith('#/sandboxes/') && location.hash !== '#/sandboxes/' + `+js(sb.ID)+
					` && document.getElementById('state-msg')?.textContent.startsWith('Made from snapshot') || document.querySelector('#snapshots-msg .error')`)
				var failed string
				user.eval(t, `document.querySelector('#snapshots-msg .error')?.textContent ?? ''`, &failed)
				if failed != "" {
					t.Fatalf("a new sandbox from the snapshot: %s", failed)
				}
				user.eval(t, `decodeURIComponent(location.hash.slice('#/sandboxes/'.length))`, &fromSnap)
				e.deleteOnCleanup(rtT, fromSnap)
				if s, want := said(), "Made from snapshot "+snapID+" "+kept; !strings.HasPrefix(s, want) {
					t.Errorf("the new sandbox's page says %q, want %q", s, want)
				}
				res, err := c.Exec(callCtx(t), fromSnap, client.ExecRequest{Script: `cat /workspace/mark; ` + sleeperAlive + ` && echo alive`})
				want := "before\n"
				if memory {
					want += "alive\n"
				}
				if err != nil || res.Stdout != want {
					t.Errorf("the new sandbox: %+v %v, want %q", res, err, want)
				}
				user.shot(t, shots, "from-snapshot")
			})

			t.Run("delete it", func(t *testing.T) {
				user.open(t, "/snapshots")
				click("delete", `tr[data-id=`+js(snapID)+`] button[data-action="delete"]`)
				user.wait(t, "the snapshot gone", `document.querySelector('main h1')?.textContent === 'Snapshots' && !document.querySelector('tr[data-id=`+js(snapID)+`]')`)
				if _, err := c.GetSnapshot(callCtx(t), snapID); !isStatus(err, http.StatusNotFound, "") {
					t.Errorf("the deleted snapshot: %v", err)
				}
				// The sandbox made from it keeps running.
				if res, err := c.Exec(callCtx(t), fromSnap, client.ExecRequest{Script: `cat /workspace/mark`}); err != nil || res.Stdout != "before\n" {
					t.Errorf("the sandbox made from the deleted snapshot: %+v %v", res, err)
				}
			})
		})
	}

	// The only failed loads are the refused commands (409 sandbox_paused).
	var errs []string
	for _, m := range b.errorsSince(0) {
		if !strings.Contains(m, "status of 409") || !strings.Contains(m, "/exec") {
			errs = append(errs, m)
		}
	}
	if len(errs) > 0 {
		t.Errorf("browser errors: %q", errs)
	}
}
