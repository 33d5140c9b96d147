package e2e

import (
	"os"
	"strings"
	"testing"

	"genesis.dev/sandbox/client"
)

// TestConsoleChanges opens a sandbox's "Changes" in the console (Chromium,
// chromedp) after an agent edited its workspace since a snapshot: the
// sandbox's page links to it, the base can be chosen among its snapshots,
// and the view lists exactly the changed files, shows the added and
// removed lines of a text file in colour classes, names a binary file
// without dumping it, and raises no browser error.
func TestConsoleChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "code-python-basic")
	svc := e.start(t)
	c := svc.client()
	rt := e.runtimes(t)[0]
	sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "code-python-basic", Runtime: rt, RiskLevel: "low"})
	execOK(t, c, sb.ID, "printf 'one\\ntwo\\nthree\\n' > /workspace/notes.txt; printf 'gone\\n' > /workspace/old.txt")
	noMemory := false
	snap, err := c.CreateSnapshot(callCtx(t), sb.ID, client.CreateSnapshotRequest{Name: "start", Memory: &noMemory})
	if err != nil {
		t.Fatal(err)
	}
	execOK(t, c, sb.ID, `set -e; sed -i 's|two|<b>TWO</b>|' /workspace/notes.txt; rm /workspace/old.txt; python3 -c 'open("/workspace/img.bin","wb").write(bytes(range(256)))'`)

	b := newConsoleBrowser(t)
	tab := b.tab(t, "tenant", svc.url())
	tab.signIn(t, e.apiKey)
	tab.open(t, "/sandboxes/"+sb.ID)
	var href string
	tab.eval(t, `document.querySelector('#open-changes')?.getAttribute('href') || ''`, &href)
	if href != "#/sandboxes/"+sb.ID+"/changes" {
		t.Errorf("the sandbox's Changes link: %q", href)
	}
	tab.open(t, "/sandboxes/"+sb.ID+"/changes?base="+snap.ID)
	tab.wait(t, "the diff", `document.querySelector('#changes-summary')`)
	var got struct {
		Rows    []string `json:"rows"`
		Options []string `json:"options"`
		Adds    []string `json:"adds"`
		Dels    []string `json:"dels"`
		Binary  string   `json:"binary"`
		Bold    int      `json:"bold"`
		Summary string   `json:"summary"`
	}
	tab.eval(t, `(() => ({
		rows: [...document.querySelectorAll('#changes tbody tr')].map((r) => r.dataset.path + ' ' + r.dataset.status),
		options: [...document.querySelectorAll('#changes-base option')].map((o) => o.value),
		adds: [...document.querySelectorAll('pre.diff .add')].map((s) => s.textContent.trim()),
		dels: [...document.querySelectorAll('pre.diff .del')].map((s) => s.textContent.trim()),
		binary: document.querySelector('.diff-file[data-path="img.bin"]')?.textContent || '',
		bold: document.querySelectorAll('pre.diff b').length,
		summary: document.querySelector('#changes-summary').textContent,
	}))()`, &got)
	wantRows := []string{"img.bin added", "notes.txt modified", "old.txt deleted"}
	if strings.Join(got.Rows, ",") != strings.Join(wantRows, ",") {
		t.Errorf("rows %q, want %q", got.Rows, wantRows)
	}
	if !strings.Contains(strings.Join(got.Options, " "), snap.ID) || got.Options[0] != "creation" {
		t.Errorf("base options %q", got.Options)
	}
	if !strings.Contains(strings.Join(got.Adds, "\n"), "+<b>TWO</b>") || !strings.Contains(strings.Join(got.Dels, "\n"), "-two") || got.Bold != 0 {
		t.Errorf("the text diff: adds %q dels %q (%d <b> elements: markup must be text)", got.Adds, got.Dels, got.Bold)
	}
	if !strings.Contains(got.Binary, "Binary file") || strings.Contains(got.Binary, "\x00") {
		t.Errorf("the binary file's section: %q", got.Binary)
	}
	if !strings.Contains(got.Summary, "3 files changed against "+snap.ID) {
		t.Errorf("summary %q", got.Summary)
	}
	if dir := os.Getenv("GENESIS_E2E_SHOTS"); dir != "" {
		tab.shot(t, dir, "console-changes")
	}
	if errs := b.errorsSince(0); len(errs) > 0 {
		t.Errorf("browser errors: %q", errs)
	}
}
