package browser

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/ports"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/testenv"
	"genesis.dev/sandbox/internal/trace"
)

// hostBrowser starts this machine's Chromium with its DevTools port on
// loopback and returns a Target that dials it directly (the agent's dial
// in production).
func hostBrowser(t testing.TB) *Target {
	t.Helper()
	profile, err := os.MkdirTemp("", "genesis-browser-test-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testenv.Chromium(t), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "--user-data-dir="+profile, "about:blank")
	// Its own process group: the cleanup stops Chromium's helpers too,
	// before its profile is removed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		os.RemoveAll(profile)
	})
	port := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "DevTools listening on ws://127.0.0.1:"); ok {
				p, _ := strconv.Atoi(rest[:strings.IndexByte(rest, '/')])
				port <- p
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	var p int
	select {
	case p = <-port:
	case <-time.After(30 * time.Second):
		t.Fatal("chromium did not print its DevTools address within 30 s")
	}
	chromiumPIDs.Store(p, cmd.Process.Pid)
	dl := t.TempDir()
	return &Target{
		Tenant: "t1", SandboxID: "sbx_1",
		Spec: config.BrowserSpec{CDPPort: p, DownloadsDir: dl, ProfileDir: "/p", ActionTimeout: 5 * time.Second, MaxActionTimeout: 20 * time.Second, MaxActions: 10},
		Dial: func(ctx context.Context, _ int) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(p))
		},
		Release: func() {},
	}
}

// chromiumPIDs maps hostBrowser's DevTools ports to its Chromium's
// process (the leader of its process group).
var chromiumPIDs sync.Map

type oneSandbox struct{ t *Target }

func (o oneSandbox) AttachBrowser(_ context.Context, tenant, id string) (*Target, error) {
	if tenant != o.t.Tenant || id != o.t.SandboxID {
		return nil, fmt.Errorf("no sandbox %s", id)
	}
	return o.t, nil
}

type memKeeper struct {
	mu   sync.Mutex
	kept map[string][]byte
}

func (k *memKeeper) KeepBytes(_ context.Context, tenant, sandboxID, name string, r io.Reader) (*sandbox.Artifact, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.kept == nil {
		k.kept = map[string][]byte{}
	}
	k.kept[name] = b
	return &sandbox.Artifact{ID: "art_" + name, Tenant: tenant, SandboxID: sandboxID, Name: name, Size: int64(len(b))}, nil
}

// runOK runs one action at a time in sandbox sbx_1 of tenant t1 and
// fails the test unless it succeeds.
func runOK(t testing.TB, ctx context.Context, m *Manager) func(api.BrowserAction) *ActionsResult {
	return func(a api.BrowserAction) *ActionsResult {
		t.Helper()
		res, err := m.Run(ctx, "t1", "sbx_1", &api.BrowserActionsRequest{Actions: []api.BrowserAction{a}})
		if err != nil || !res.OK {
			t.Fatalf("%s: %+v %v", a.Type, res, err)
		}
		return res
	}
}

func newManager(t testing.TB, tgt *Target, keep Keeper) *Manager {
	t.Helper()
	signer, err := ports.NewSigner(bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	// No links are made here: every key is live.
	live := func(context.Context, string, string) error { return nil }
	pp, err := ports.New(ports.Config{Sandboxes: portsOf{tgt}, Signer: signer, KeyLive: live})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Sandboxes: oneSandbox{tgt}, Ports: pp, Artifacts: keep, ReadyWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

type portsOf struct{ t *Target }

func (p portsOf) AttachPorts(context.Context, string, string) (*ports.Target, error) {
	return &ports.Target{SandboxID: p.t.SandboxID, Dial: p.t.Dial, Release: func() {}}, nil
}

// TestActionsDriveARealChromium runs the actions API against this
// machine's Chromium: a form filled and submitted, text read, a screenshot
// kept as a PNG, a failing wait that stops the run, tabs.
func TestActionsDriveARealChromium(t *testing.T) {
	t.Parallel()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			fmt.Fprint(w, `<html><head><title>form</title></head><body><form action="/done"><input id="q" name="q"><button id="go">Go</button></form></body></html>`)
		case "/more":
			fmt.Fprint(w, `<html><head><title>more</title></head><body style="height:3000px"><h1>Pick one</h1>
<select id="s" onchange="document.title='picked '+this.value"><option value="a">A</option><option value="b">B</option></select>
<input id="k" onkeydown="if (event.key === 'Enter') document.getElementById('log').textContent = 'enter ' + this.value">
<p id="log"></p></body></html>`)
		case "/done":
			fmt.Fprintf(w, `<html><head><title>done</title></head><body><p id="out">got %s</p></body></html>`, r.URL.Query().Get("q"))
		case "/never":
			// A page that never finishes: the head, then nothing.
			fmt.Fprint(w, `<html><head><title>never</title></head><body>`)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}
	}))
	defer site.Close()
	tgt := hostBrowser(t)
	keep := &memKeeper{}
	m := newManager(t, tgt, keep)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := m.Run(ctx, "t1", "sbx_1", &api.BrowserActionsRequest{Actions: []api.BrowserAction{
		{Type: "navigate", URL: site.URL + "/"},
		{Type: "fill", Selector: "#q", Text: "hello genesis"},
		{Type: "click", Selector: "#go"},
		{Type: "wait", Selector: "#out"},
		{Type: "text", Selector: "#out"},
		{Type: "screenshot", Name: "done.png"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Results {
		t.Logf("%d %s ok=%v %dms %s %v", r.Index, r.Type, r.OK, r.Ms, r.Error, r.Value)
	}
	if !res.OK || len(res.Results) != 6 {
		t.Fatalf("actions did not all succeed: %+v", res)
	}
	if got := res.Results[4].Value; got != "got hello genesis" {
		t.Errorf("text = %q, want the submitted form's answer", got)
	}
	if res.Title != "done" || !strings.HasPrefix(res.URL, site.URL+"/done?q=hello") {
		t.Errorf("final page = %q %q", res.Title, res.URL)
	}
	shot := keep.kept["done.png"]
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil || img.Bounds().Dx() < 100 {
		t.Errorf("screenshot does not decode as a PNG page: %v (%d bytes)", err, len(shot))
	}
	if res.Results[5].Artifact == nil || res.Results[5].Artifact.Size != int64(len(shot)) {
		t.Errorf("screenshot artifact = %+v", res.Results[5].Artifact)
	}
	// Not kept: the image is in the answer, and nothing is kept. The same
	// page encoded for size is a valid PNG too, and no larger.
	no := false
	res, err = m.Run(ctx, "t1", "sbx_1", &api.BrowserActionsRequest{Actions: []api.BrowserAction{
		{Type: "screenshot", Keep: &no}, {Type: "screenshot", Keep: &no, Compress: true},
	}})
	if err != nil || !res.OK {
		t.Fatalf("screenshots not kept: %+v %v", res, err)
	}
	var sizes [2]int
	for i, r := range res.Results {
		im, ok := r.Value.(api.BrowserImage)
		if !ok || im.MIME != "image/png" || r.Artifact != nil {
			t.Fatalf("screenshot %d not kept: value %T, artifact %+v", i, r.Value, r.Artifact)
		}
		if _, err := png.Decode(bytes.NewReader(im.Data)); err != nil {
			t.Errorf("screenshot %d not kept does not decode: %v", i, err)
		}
		sizes[i] = len(im.Data)
	}
	if sizes[1] > sizes[0] {
		t.Errorf("the PNG encoded for size is %d bytes, the fast one %d", sizes[1], sizes[0])
	}
	if len(keep.kept) != 1 {
		t.Errorf("kept %d artifacts, want only done.png", len(keep.kept))
	}

	// A page that never finishes loading fails its navigate at the
	// action's timeout; the next request's navigate works.
	t0 := time.Now()
	res, err = m.Run(ctx, "t1", "sbx_1", &api.BrowserActionsRequest{Actions: []api.BrowserAction{{Type: "navigate", URL: site.URL + "/never", TimeoutMs: 500}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || !strings.Contains(res.Results[0].Error, "timed out") || time.Since(t0) > 10*time.Second {
		t.Errorf("a page that never loads: %+v after %v", res, time.Since(t0))
	}
	res, err = m.Run(ctx, "t1", "sbx_1", &api.BrowserActionsRequest{Actions: []api.BrowserAction{{Type: "navigate", URL: site.URL + "/done?q=after"}, {Type: "text", Selector: "#out"}}})
	if err != nil || !res.OK || res.Results[1].Value != "got after" {
		t.Fatalf("a navigate after the one that never loaded: %+v %v", res, err)
	}

	// A wait that cannot succeed fails its action, and the run stops there.
	res, err = m.Run(ctx, "t1", "sbx_1", &api.BrowserActionsRequest{Actions: []api.BrowserAction{
		{Type: "wait", Selector: "#never", TimeoutMs: 300},
		{Type: "navigate", URL: site.URL + "/"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || len(res.Results) != 1 || res.Results[0].OK || !strings.Contains(res.Results[0].Error, "timed out") {
		t.Errorf("a failing wait: %+v", res)
	}
	if res.Title != "done" {
		t.Errorf("the action after the failed one ran: title %q", res.Title)
	}

	// select, press, snapshot, a scaled screenshot.
	res, err = m.Run(ctx, "t1", "sbx_1", &api.BrowserActionsRequest{Actions: []api.BrowserAction{
		{Type: "navigate", URL: site.URL + "/more"},
		{Type: "select", Selector: "#s", Value: "b"},
		{Type: "type", Selector: "#k", Text: "abc"},
		{Type: "press", Selector: "#k", Key: "Enter"},
		{Type: "text", Selector: "#log"},
		{Type: "snapshot"},
		{Type: "screenshot", Scale: 0.5, Name: "half.png"},
		{Type: "select", Selector: "#s", Value: "zzz"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.OK || len(res.Results) != 8 || !strings.Contains(res.Results[7].Error, "no option") {
		t.Fatalf("select of a missing option should fail the last action: %+v", res)
	}
	if res.Results[1].Value != "b" || res.Results[4].Value != "enter abc" || res.Title != "picked b" {
		t.Errorf("select/press: %v %v title %q", res.Results[1].Value, res.Results[4].Value, res.Title)
	}
	snap, _ := res.Results[5].Value.(*Snapshot)
	if snap == nil || !strings.Contains(snap.Text, `heading "Pick one"`) || !strings.Contains(snap.Text, "combobox") {
		t.Errorf("snapshot = %+v", snap)
	}
	half, err := png.Decode(bytes.NewReader(keep.kept["half.png"]))
	// Half the viewport (less a scrollbar on this long page).
	if w, full := half.Bounds().Dx(), img.Bounds().Dx(); err != nil || w < full*45/100 || w > full/2 {
		t.Errorf("a screenshot at scale 0.5: %v, width %d vs %d", err, half.Bounds().Dx(), img.Bounds().Dx())
	}

	// Tabs: open a second one, list both, close it; the first stays.
	res, err = m.Run(ctx, "t1", "sbx_1", &api.BrowserActionsRequest{Actions: []api.BrowserAction{
		{Type: "tab_new", URL: site.URL + "/"},
		{Type: "tabs"},
		{Type: "tab_close"},
		{Type: "tabs"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK {
		t.Fatalf("tabs: %+v", res)
	}
	if n := len(res.Results[1].Value.([]api.BrowserTab)); n != 2 {
		t.Errorf("tabs after tab_new = %d, want 2", n)
	}
	if tabs := res.Results[3].Value.([]api.BrowserTab); len(tabs) != 1 || tabs[0].Title != "picked b" {
		t.Errorf("tabs after tab_close = %+v, want the first tab only", tabs)
	}

	// Ending the session detaches: the page stays open in the browser.
	m.Close()
	v, err := fetchVersion(ctx, tgt)
	if err != nil || v.Browser == "" {
		t.Fatalf("the browser after the session ended: %v %v", v, err)
	}
	resp, err := httpClient(tgt).Get("http://127.0.0.1:" + strconv.Itoa(tgt.Spec.CDPPort) + "/json/list")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(body, []byte(site.URL+"/more")) {
		t.Errorf("the session's page was closed when the session ended: /json/list = %s", body)
	}
}

// TestOfflineNavigationSaysWhy: a page a sandbox without network could
// not load says so and how to allow it; its own loopback is no such case.
func TestOfflineNavigationSaysWhy(t *testing.T) {
	t.Parallel()
	cause := errors.New("page load error net::ERR_NAME_NOT_RESOLVED")
	err := offline("sbx_1", "browser-playwright", "https://allowed.example/", cause)
	if !errors.Is(err, cause) || !strings.Contains(err.Error(), "sandbox sbx_1 has no network (mode none)") ||
		!strings.Contains(err.Error(), "genesis sandbox create --profile browser-playwright --allow allowed.example") {
		t.Errorf("offline: %v", err)
	}
	for _, u := range []string{"http://127.0.0.1:8000/", "http://localhost:3000/x", "about:blank", "::"} {
		if got := offline("sbx_1", "browser-playwright", u, cause); got != cause {
			t.Errorf("%s: %v, want the error unchanged", u, got)
		}
	}
}

// memTrace is a trace.Recorder that keeps the events.
type memTrace struct {
	mu  sync.Mutex
	evs []trace.Event
}

func (r *memTrace) Record(_ context.Context, _, _ string, e trace.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, e)
}

func (r *memTrace) kinds(kind trace.Kind) []trace.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []trace.Event
	for _, e := range r.evs {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// TestTraceShotAfterTheAnswer: the trace's screenshot after a click is
// captured after the request's answer, and an action that changes the
// page right after waits for it, so the capture shows what the click
// left, not what came after.
func TestTraceShotAfterTheAnswer(t *testing.T) {
	t.Parallel()
	tgt := hostBrowser(t)
	keep := &memKeeper{}
	m := newManager(t, tgt, keep)
	rec := &memTrace{}
	m.cfg.Trace, m.cfg.Screenshots = rec, "after"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := runOK(t, ctx, m)
	no := false
	run(api.BrowserAction{Type: "evaluate", Expression: `document.documentElement.style.background = "white";
document.body.innerHTML = '<button id="b" onclick="document.documentElement.style.background = \'black\'">paint</button>'; 1`})
	run(api.BrowserAction{Type: "click", Selector: "#b"})
	run(api.BrowserAction{Type: "evaluate", Expression: `document.documentElement.style.background = "white"; 1`})
	if shot := run(api.BrowserAction{Type: "screenshot", Keep: &no}); shot.Results[0].Value == nil {
		t.Fatalf("a screenshot answered no image: %+v", shot)
	}

	var ev map[string]any
	for deadline := time.Now().Add(30 * time.Second); ; {
		if evs := rec.kinds(trace.KindBrowserScreenshot); len(evs) > 0 {
			if len(evs) != 1 {
				t.Fatalf("%d trace screenshots, want the click's only", len(evs))
			}
			if err := json.Unmarshal(evs[0].Data, &ev); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no trace screenshot of the click within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if ev["type"] != "click" || ev["phase"] != "after" || ev["error"] != nil || ev["artifact"] == nil {
		t.Fatalf("the click's trace screenshot: %v", ev)
	}
	var shot []byte
	keep.mu.Lock()
	for name, b := range keep.kept {
		if strings.HasSuffix(name, "-0-after.png") {
			shot = b
		}
	}
	keep.mu.Unlock()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("the click's trace screenshot (%d bytes): %v", len(shot), err)
	}
	b := img.Bounds()
	if r, g, bl, _ := img.At(b.Dx()/2, b.Dy()-10).RGBA(); r > 0x1000 || g > 0x1000 || bl > 0x1000 {
		t.Errorf("the click's trace screenshot shows (%x, %x, %x) at the bottom: not the black the click painted, so it was taken after the next action", r, g, bl)
	}
}
