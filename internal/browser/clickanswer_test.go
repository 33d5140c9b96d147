package browser

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/api"
)

// TestClickAnswerPushed: a click's answer (URL and title) is the page's
// after the click's handlers, whether the page pushed it (clickanswer.go)
// or it was read after the release: pushed for a plain button, by
// selector and at a point, again after the page navigated; read for a
// click whose default action still runs (a link to a fragment, which
// changes the URL after the click event; a checkbox, whose change handler
// runs after it), for a click the page stopped on its way up and for a
// click in a frame. A
// window listener the page added after the service's still runs before
// the answer is taken. The page's own scripts see neither the binding nor
// the listener.
func TestClickAnswerPushed(t *testing.T) {
	t.Parallel()
	tgt := hostBrowser(t)
	m := newManager(t, tgt, &memKeeper{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	run := runOK(t, ctx, m)
	pushed := func() int {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.sessions[tgt.SandboxID].pushedAnswers
	}
	setup := func(hash string) {
		t.Helper()
		run(api.BrowserAction{Type: "evaluate", Expression: `history.replaceState(null, '', '#` + hash + `'); let n = 0;
document.body.innerHTML = '<button id="b" style="position:absolute;left:0;top:0;width:200px;height:80px">0</button>' +
  '<a id="l" href="#moved" style="position:absolute;left:0;top:100px">link</a>' +
  '<input id="c" type="checkbox" style="position:absolute;left:0;top:150px">' +
  '<div id="s" style="position:absolute;left:0;top:200px;width:100px;height:40px">stop</div>';
const b = document.getElementById('b');
b.addEventListener('click', () => { n++; b.textContent = n; document.title = 'clicked ' + n; });
document.getElementById('c').addEventListener('change', (e) => { document.title = 'checked ' + e.target.checked; });
document.getElementById('s').addEventListener('click', (e) => { e.stopPropagation(); document.title = 'stopped'; }); 1`})
	}
	setup("start")
	const clicks = 10
	for i := 1; i <= clicks; i++ {
		a := api.BrowserAction{Type: "click", Selector: "#b"}
		if i%2 == 0 {
			x, y := 100.0, 40.0
			a = api.BrowserAction{Type: "click", X: &x, Y: &y}
		}
		p0 := pushed()
		res := run(a)
		t.Logf("click %d (%v) pushed %v", i, a.Selector, pushed() > p0)
		if res.Title != "clicked "+strconv.Itoa(i) || !strings.HasSuffix(res.URL, "#start") {
			t.Fatalf("click %d answered %q %q, want the title its handler set", i, res.URL, res.Title)
		}
	}
	// The press and release answer when the page has handled them, and
	// the push is sent while it handles the release: most clicks' answers
	// are in by then, and at least one must be.
	if p := pushed(); p == 0 {
		t.Fatalf("none of %d clicks' answers was pushed by the page", clicks)
	}
	t.Logf("%d of %d answers pushed", pushed(), clicks)

	// A window listener the page adds after the service's runs before it
	// from the next click on.
	run(api.BrowserAction{Type: "evaluate", Expression: `document.body.insertAdjacentHTML('beforeend', '<div id="w" style="position:absolute;left:0;top:300px;width:100px;height:40px">w</div>');
window.addEventListener('click', (e) => { if (e.target.id === 'w') document.title = 'window saw w ' + e.clientY; }); 1`})
	before := pushed()
	if res := run(api.BrowserAction{Type: "click", Selector: "#w"}); res.Title != "window saw w 320" {
		t.Fatalf("a click a later window listener handles answered title %q", res.Title)
	}
	x, y := 50.0, 310.0
	if res := run(api.BrowserAction{Type: "click", X: &x, Y: &y}); res.Title != "window saw w 310" {
		t.Fatalf("a click at a point a later window listener handles answered title %q", res.Title)
	}
	if pushed()-before != 2 {
		t.Fatalf("%d of 2 answers pushed for clicks a window listener handles", pushed()-before)
	}

	before = pushed()
	if res := run(api.BrowserAction{Type: "click", Selector: "#l"}); !strings.HasSuffix(res.URL, "#moved") {
		t.Fatalf("a click on a link to #moved answered URL %q", res.URL)
	}
	if res := run(api.BrowserAction{Type: "click", Selector: "#c"}); res.Title != "checked true" {
		t.Fatalf("a click on a checkbox answered title %q, want its change handler's", res.Title)
	}
	if res := run(api.BrowserAction{Type: "click", Selector: "#s"}); res.Title != "stopped" {
		t.Fatalf("a click the page stopped answered title %q", res.Title)
	}
	if p := pushed(); p != before {
		t.Fatalf("%d answers pushed for a link, a checkbox and a stopped click, want none", p-before)
	}
	res := run(api.BrowserAction{Type: "evaluate", Expression: `typeof genesisClickAnswer + ' ' + typeof __genesisClick`})
	if v, _ := res.Results[0].Value.(json.RawMessage); string(v) != `"undefined undefined"` {
		t.Fatalf("the page sees the click's binding and state: %s", v)
	}

	// A new document: the world is made again.
	run(api.BrowserAction{Type: "navigate", URL: "about:blank"})
	setup("again")
	before = pushed()
	for i := 1; i <= clicks; i++ {
		// Clicks at a point first: the new document has the listener.
		a := api.BrowserAction{Type: "click", Selector: "#b"}
		if i <= clicks/2 {
			x, y := 100.0, 40.0
			a = api.BrowserAction{Type: "click", X: &x, Y: &y}
		}
		if res := run(a); res.Title != "clicked "+strconv.Itoa(i) || !strings.HasSuffix(res.URL, "#again") {
			t.Fatalf("click %d after navigating answered %q %q", i, res.URL, res.Title)
		}
		if i == clicks/2 && pushed() == before {
			t.Fatal("no click's answer at a point was pushed after the page navigated")
		}
	}
	if got := pushed() - before; got != clicks {
		t.Fatalf("%d of %d clicks' answers pushed after the page navigated", got, clicks)
	}
	// A frame's click pushes nothing of the frame's.
	run(api.BrowserAction{Type: "evaluate", Expression: `document.body.insertAdjacentHTML('beforeend', '<iframe id="f" style="position:absolute;left:0;top:400px;width:300px;height:100px;border:0" srcdoc="<title>inner</title><button id=i style=width:100px;height:50px onclick=&quot;parent.document.title = \'frame clicked\'&quot;>i</button>"></iframe>');
new Promise((r) => document.getElementById('f').onload = () => r(1))`})
	before = pushed()
	x, y = 50.0, 425.0
	if res := run(api.BrowserAction{Type: "click", X: &x, Y: &y}); res.Title != "frame clicked" {
		t.Fatalf("a click in a frame answered title %q", res.Title)
	}
	if pushed() != before {
		t.Fatal("a click in a frame was answered by a push")
	}
}
