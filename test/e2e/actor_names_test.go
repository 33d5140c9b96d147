package e2e

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"genesis.dev/sandbox/client"
)

// TestActorNamesRenderAsText: a person's name in a trace actor is letters,
// digits, spaces and . - _ @ : only; one with markup is refused (400) and
// recorded nowhere. What a trace holds — names and free text with markup
// in it — is shown by the console's trace player (here the export's,
// opened offline in Chromium) as text: no element is made from it and no
// script in it runs.
func TestActorNamesRenderAsText(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "tool-basic")
	svc := e.start(t)
	c := svc.client()
	sb, err := c.CreateSandbox(callCtx(t), client.CreateSandboxRequest{Profile: "tool-basic", Runtime: e.runtimes(t)[0]}, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteSandbox(callCtx(t), sb.ID) })
	events := "/v1/sandboxes/" + sb.ID + "/trace/events"
	for _, who := range []string{`<img src=x onerror="window.__pwned=1">`, "<b>ann</b>", `ann"><script>window.__pwned=1</script>`, "ann\u202e"} {
		if code, body := apiJSON(t, svc, "POST", events, map[string]any{"kind": "annotation", "actor": "human:" + who, "data": map[string]any{"text": "x"}}, nil); code != 400 || !strings.Contains(body, "invalid_trace_event") {
			t.Errorf("actor human:%s: %d %s, want 400 invalid_trace_event", who, code, body)
		}
	}
	const name = "human:Ana Lima @ops:on-call_1.b"
	markup := `<img src=x onerror="window.__pwned=1"><b>bold</b>`
	script := `<script>window.__pwned=1</script>done`
	if code, body := apiJSON(t, svc, "POST", events, map[string]any{"kind": "annotation", "actor": name, "data": map[string]any{"text": markup}}, nil); code != 201 {
		t.Fatalf("annotation: %d %s", code, body)
	}
	if code, body := apiJSON(t, svc, "POST", events, map[string]any{"kind": "task.status", "actor": "agent", "data": map[string]any{"status": script}}, nil); code != 201 {
		t.Fatalf("task.status: %d %s", code, body)
	}
	files, dir := exportUnpacked(t, c, sb.ID)
	if _, ok := files["player.html"]; !ok {
		t.Fatal("the export has no player.html (the console is not built into this binary: make console)")
	}
	var r struct {
		OK            bool     `json:"ok"`
		Error         string   `json:"error"`
		Actors        []string `json:"actors"`
		Summaries     []string `json:"summaries"`
		Options       []string `json:"options"`
		Foreign       int      `json:"foreign"`
		Pwned         bool     `json:"pwned"`
		ConsoleErrors []string `json:"console_errors"`
	}
	runNodeJSON(t, "rendered.mjs", &r, "file://"+filepath.Join(dir, "player.html"))
	if !r.OK || len(r.ConsoleErrors) > 0 {
		t.Fatalf("player: %s %q", r.Error, r.ConsoleErrors)
	}
	if !slices.Contains(r.Actors, name) || !slices.Contains(r.Options, name) {
		t.Errorf("the person's name is not shown as given: actors %q, filter %q", r.Actors, r.Options)
	}
	if !slices.Contains(r.Summaries, markup) || !slices.Contains(r.Summaries, script) {
		t.Errorf("the markup is not shown as text: %q", r.Summaries)
	}
	if r.Foreign != 0 || r.Pwned {
		t.Errorf("the page made %d elements from the trace's data; a script of it ran: %v", r.Foreign, r.Pwned)
	}
}
