package mcpserve

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/agent/agentclient"
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/browser"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/files"
	"genesis.dev/sandbox/internal/joblog"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/snapshots"
	"genesis.dev/sandbox/internal/tenant"
)

// fakeSandboxes records creates and deletes.
type fakeSandboxes struct {
	mu      sync.Mutex
	n       int
	created []string
	deleted []string
	refuse  error
}

func (f *fakeSandboxes) CreateSandbox(_ context.Context, in control.CreateSandboxInput) (*sandbox.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil {
		return nil, f.refuse
	}
	f.n++
	id := fmt.Sprintf("sbx_%s_%d", in.Tenant, f.n)
	f.created = append(f.created, id)
	return &sandbox.Sandbox{ID: id, Tenant: in.Tenant, Profile: in.Profile, Runtime: sandbox.Runtime("runsc"), State: sandbox.State("running")}, nil
}

func (f *fakeSandboxes) DeleteSandbox(_ context.Context, tn, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, tn+"/"+id)
	return nil
}

func (f *fakeSandboxes) deletes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(slices.Values(f.deleted))
}

// unusedJobs and unusedFiles fail every call (the session tests do not
// run anything).
type unusedJobs struct{}

func (unusedJobs) Exec(context.Context, jobs.ExecInput) (*jobs.ExecOutput, error) {
	return nil, errdefs.ErrNotImplemented
}
func (unusedJobs) StartJob(context.Context, jobs.ExecInput) (*sandbox.Job, error) {
	return nil, errdefs.ErrNotImplemented
}
func (unusedJobs) JobLog(context.Context, string, string) (*sandbox.Job, *joblog.Log, error) {
	return nil, nil, errdefs.ErrNotImplemented
}
func (unusedJobs) CreateContext(context.Context, string, string, string) (*sandbox.Session, error) {
	return nil, errdefs.ErrNotImplemented
}
func (unusedJobs) RunCode(context.Context, string, string, string, int64) (*jobs.RunResult, error) {
	return nil, errdefs.ErrNotImplemented
}

type unusedFiles struct{}

func (unusedFiles) WriteFile(context.Context, files.WriteFileInput) (agentproto.FileWriteResult, error) {
	return agentproto.FileWriteResult{}, errdefs.ErrNotImplemented
}
func (unusedFiles) ReadFile(context.Context, string, string, string, string, http.Header) (*agentclient.FileResponse, context.CancelFunc, error) {
	return nil, nil, errdefs.ErrNotImplemented
}
func (unusedFiles) ListFiles(context.Context, string, string, string, int, int) (agentproto.FileList, error) {
	return agentproto.FileList{}, errdefs.ErrNotImplemented
}
func (unusedFiles) SearchFiles(context.Context, string, string, agentproto.SearchRequest) (agentproto.SearchResult, error) {
	return agentproto.SearchResult{}, errdefs.ErrNotImplemented
}

// serve serves s over HTTP, the bearer token naming the tenant (the edge's
// key check stands outside this package).
func serve(t *testing.T, s *Server) *httptest.Server {
	t.Helper()
	hs := httptest.NewServer(s.Handler(Edge{PrincipalOf: func(r *http.Request) tenant.Principal {
		tn, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		return tenant.Principal{Tenant: tn, KeyID: "key_" + tn}
	}}))
	t.Cleanup(hs.Close)
	return hs
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func connect(t *testing.T, url, tn string) *sdk.ClientSession {
	t.Helper()
	cl := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := cl.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: bearer{tn, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func create(t *testing.T, cs *sdk.ClientSession, keep bool) (SandboxOutput, *sdk.CallToolResult) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: ToolCreateSandbox, Arguments: map[string]any{"profile": "p", "keep": keep}})
	if err != nil {
		t.Fatal(err)
	}
	var out SandboxOutput
	if !res.IsError {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
	}
	return out, res
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSessionEndDestroysOwned: the sandboxes a session created end with it
// (the client's DELETE), those created with keep do not, and a destroyed
// one is not destroyed again; every call is audited as the caller's key.
func TestSessionEndDestroysOwned(t *testing.T) {
	t.Parallel()
	sbx := &fakeSandboxes{}
	var mu sync.Mutex
	var audit []tenant.AuditRecord
	s, err := New(Config{Sandboxes: sbx, Jobs: unusedJobs{}, Files: unusedFiles{}, Audit: func(_ context.Context, r *tenant.AuditRecord) {
		mu.Lock()
		audit = append(audit, *r)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	hs := serve(t, s)
	cs := connect(t, hs.URL, "a")
	owned, _ := create(t, cs, false)
	gone, _ := create(t, cs, false)
	kept, _ := create(t, cs, true)
	if owned.Kept || !kept.Kept || owned.SandboxID == "" {
		t.Fatalf("created %+v %+v", owned, kept)
	}
	if res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: ToolDestroySandbox, Arguments: map[string]any{"sandbox_id": gone.SandboxID}}); err != nil || res.IsError {
		t.Fatalf("destroy: %v %+v", err, res)
	}
	if got := sbx.deletes(); len(got) != 1 {
		t.Fatalf("deletes before the end: %v", got)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	want := []string{"a/" + gone.SandboxID, "a/" + owned.SandboxID}
	slices.Sort(want)
	waitFor(t, "the session's sandboxes to end", func() bool { return slices.Equal(sbx.deletes(), want) })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := sbx.deletes(); !slices.Equal(got, want) {
		t.Errorf("deletes %v, want %v (the kept %s stays)", got, want, kept.SandboxID)
	}
	mu.Lock()
	defer mu.Unlock()
	var actions []string
	for _, r := range audit {
		if r.Actor != "key_a" || r.Tenant != "a" || r.Status != 200 {
			t.Errorf("audit record %+v", r)
		}
		actions = append(actions, r.Action+" "+r.Target)
	}
	if len(actions) != 5 || !slices.Contains(actions, "mcp session_end "+owned.SandboxID) || !slices.Contains(actions, "mcp create_sandbox "+kept.SandboxID) {
		t.Errorf("audit %v", actions)
	}
}

// TestCloseEndsSessions: closing the server ends the open sessions and
// destroys their sandboxes.
func TestCloseEndsSessions(t *testing.T) {
	t.Parallel()
	sbx := &fakeSandboxes{}
	s, err := New(Config{Sandboxes: sbx, Jobs: unusedJobs{}, Files: unusedFiles{}})
	if err != nil {
		t.Fatal(err)
	}
	hs := serve(t, s)
	cs := connect(t, hs.URL, "b")
	defer cs.Close()
	owned, _ := create(t, cs, false)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := sbx.deletes(); !slices.Equal(got, []string{"b/" + owned.SandboxID}) {
		t.Errorf("deletes %v", got)
	}
}

// TestSessionOfAnotherTenant: a session's id is refused to another tenant,
// and a refused create is an isError result starting with the problem's
// code.
func TestSessionOfAnotherTenant(t *testing.T) {
	t.Parallel()
	sbx := &fakeSandboxes{refuse: errdefs.WithCode("risk_above_ceiling", fmt.Errorf("risk high is above the ceiling: %w", errdefs.ErrPermissionDenied))}
	s, err := New(Config{Sandboxes: sbx, Jobs: unusedJobs{}, Files: unusedFiles{}})
	if err != nil {
		t.Fatal(err)
	}
	hs := serve(t, s)
	cs := connect(t, hs.URL, "a")
	defer cs.Close()
	_, res := create(t, cs, false)
	if !res.IsError || !strings.HasPrefix(res.Content[0].(*sdk.TextContent).Text, "risk_above_ceiling: ") {
		t.Errorf("refused create: %+v", res)
	}
	req, _ := http.NewRequest("POST", hs.URL, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Authorization", "Bearer b")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("another tenant on the session: %d", resp.StatusCode)
	}
}

func TestRunCodeResult(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG fake")
	v := "42"
	res, out, err := runCodeResult("ctx_1", &jobs.RunResult{Status: "ok", Value: &v,
		Exec:    &jobs.ExecOutput{Stdout: []byte("hi\n"), Stderr: []byte("\xff")},
		Outputs: []jobs.RichOutput{{MIME: "image/png", Data: base64.StdEncoding.EncodeToString(png)}, {MIME: "text/html", Data: "eA=="}, {MIME: "image/png", Data: "!!"}}})
	if err != nil {
		t.Fatal(err)
	}
	if out.ContextID != "ctx_1" || out.Value != "42" || out.Stdout != "hi\n" || out.Stderr != "\uFFFD" || out.Images != 1 {
		t.Errorf("out %+v", out)
	}
	if len(res.Content) != 2 {
		t.Fatalf("content %+v", res.Content)
	}
	if img, ok := res.Content[1].(*sdk.ImageContent); !ok || string(img.Data) != string(png) || img.MIMEType != "image/png" {
		t.Errorf("image %+v", res.Content[1])
	}
	_, out, _ = runCodeResult("ctx_1", &jobs.RunResult{Status: "error", Error: &jobs.CodeError{Name: "NameError", Value: "y", Traceback: []string{"line 1"}}})
	if out.Error != "NameError: y\nline 1" {
		t.Errorf("error %q", out.Error)
	}
}

func TestReadAll(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		limit int64
		want  string
		more  bool
	}{{"abc", 3, "abc", false}, {"abcd", 3, "abc", true}, {"", 3, "", false}} {
		b, more, err := readAll(strings.NewReader(tc.in), tc.limit)
		if err != nil || string(b) != tc.want || more != tc.more {
			t.Errorf("readAll(%q, %d) = %q %v %v", tc.in, tc.limit, b, more, err)
		}
	}
}

func TestBrowserResult(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG fake")
	res, out := browserResult(&browser.ActionsResult{OK: false, URL: "about:blank", Title: "t", Results: []browser.ActionResult{
		{Index: 0, Type: "evaluate", OK: true, Value: float64(2)},
		{Index: 1, Type: "screenshot", OK: true, Value: api.BrowserImage{MIME: "image/png", Data: png}},
		{Index: 2, Type: "click", OK: false, Error: "no element matches #x"},
	}})
	if out.OK || len(out.Results) != 3 || out.Results[0].Value != float64(2) || out.Results[1].Value != "image 1" || out.Results[2].Error == "" {
		t.Errorf("out %+v", out)
	}
	if len(res.Content) != 2 {
		t.Fatalf("content %+v", res.Content)
	}
	text := res.Content[0].(*sdk.TextContent).Text
	if !strings.Contains(text, "0 evaluate: 2") || !strings.Contains(text, "2 click failed: no element matches #x") {
		t.Errorf("text %q", text)
	}
	if img, ok := res.Content[1].(*sdk.ImageContent); !ok || string(img.Data) != string(png) {
		t.Errorf("image %+v", res.Content[1])
	}
}

// TestAdoptCarriesContexts: a copy whose memory came back takes over the
// session's code contexts of its source (their copies); a copy of files
// only does not, and a kept copy is not owned.
func TestAdoptCarriesContexts(t *testing.T) {
	t.Parallel()
	s, err := New(Config{Sandboxes: &fakeSandboxes{}, Jobs: unusedJobs{}, Files: unusedFiles{}})
	if err != nil {
		t.Fatal(err)
	}
	se := &session{owned: map[string]bool{}, contexts: map[contextKey]string{{"sbx_a", "python"}: "ctx_1", {"sbx_other", "python"}: "ctx_2"}}
	s.adopt(se, nil, "sbx_a", &snapshots.Made{Sandbox: &sandbox.Sandbox{ID: "sbx_b"}, Memory: true, Sessions: map[string]string{"ctx_1": "ctx_9", "ctx_2": "ctx_8"}}, false)
	s.adopt(se, nil, "sbx_a", &snapshots.Made{Sandbox: &sandbox.Sandbox{ID: "sbx_c"}, Memory: false, Sessions: map[string]string{"ctx_1": "ctx_7"}}, true)
	if got := se.contexts[contextKey{"sbx_b", "python"}]; got != "ctx_9" {
		t.Errorf("the memory copy's context %q, want ctx_9", got)
	}
	if got, ok := se.contexts[contextKey{"sbx_c", "python"}]; ok {
		t.Errorf("the files-only copy has context %q", got)
	}
	if len(se.contexts) != 3 || !se.owned["sbx_b"] || se.owned["sbx_c"] {
		t.Errorf("contexts %v, owned %v", se.contexts, se.owned)
	}
}

// slowJobs runs an exec until its context ends or release is closed.
type slowJobs struct {
	unusedJobs
	started  chan struct{} // gets one value per exec started
	release  chan struct{} // each value lets one exec end
	canceled chan struct{}
}

func newSlowJobs() slowJobs {
	return slowJobs{started: make(chan struct{}, 10), release: make(chan struct{}), canceled: make(chan struct{})}
}

func (j slowJobs) Exec(ctx context.Context, in jobs.ExecInput) (*jobs.ExecOutput, error) {
	j.started <- struct{}{}
	select {
	case <-j.release:
		code := 0
		return &jobs.ExecOutput{Job: &sandbox.Job{ID: "job_1", ExitCode: &code, ExitReason: sandbox.ExitReason("exited")}, Stdout: []byte("done\n")}, nil
	case <-ctx.Done():
		close(j.canceled)
		return nil, ctx.Err()
	}
}

// TestExecProgressAndCancel: a long exec sends progress notifications to
// a caller that asked for them, and the caller's cancellation
// (notifications/cancelled) ends the exec's context (the job's).
func TestExecProgressAndCancel(t *testing.T) {
	t.Parallel()
	jb := newSlowJobs()
	s, err := New(Config{Sandboxes: &fakeSandboxes{}, Jobs: jb, Files: unusedFiles{}, ProgressInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hs := serve(t, s)
	progress := make(chan *sdk.ProgressNotificationParams, 100)
	cl := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *sdk.ProgressNotificationClientRequest) { progress <- r.Params }})
	cs, err := cl.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: hs.URL,
		HTTPClient: &http.Client{Transport: bearer{"a", http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	params := &sdk.CallToolParams{Name: ToolExec, Arguments: map[string]any{"sandbox_id": "sbx_1", "command": []string{"sleep", "1"}}}
	params.SetProgressToken("tok-1")
	done := make(chan *sdk.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), params)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	for i := 0; i < 2; i++ {
		select {
		case p := <-progress:
			if p.ProgressToken != "tok-1" || p.Progress != float64(i+1) || !strings.HasPrefix(p.Message, "exec: running for") {
				t.Errorf("progress %+v", p)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no progress notification")
		}
	}
	jb.release <- struct{}{}
	if res := <-done; res == nil || res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "done") {
		t.Errorf("result %+v", res)
	}

	<-jb.started // the first exec's
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: ToolExec, Arguments: map[string]any{"sandbox_id": "sbx_1", "command": []string{"sleep", "600"}}})
		errc <- err
	}()
	<-jb.started
	cancel()
	if err := <-errc; err == nil {
		t.Error("the cancelled call returned no error")
	}
	select {
	case <-jb.canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the cancellation did not reach the exec")
	}
}

func TestParseResourceURI(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		uri, id, path string
		ok            bool
	}{
		{"sandbox://sbx_1/notes/a.txt", "sbx_1", "notes/a.txt", true},
		{"sandbox://sbx_1//etc/hostname", "sbx_1", "/etc/hostname", true},
		{"sandbox://sbx_1/", "sbx_1", "", true},
		{"sandbox://sbx_1", "sbx_1", "", true},
		{"sandbox://sbx_1/dir/", "sbx_1", "dir/", true},
		{"file:///etc/passwd", "", "", false},
		{"sandbox:///x", "", "", false},
		{"sandbox://sbx_1/a?x=1", "", "", false},
	} {
		id, path, ok := parseResourceURI(tc.uri)
		if id != tc.id || path != tc.path || ok != tc.ok {
			t.Errorf("parseResourceURI(%q) = %q %q %v, want %q %q %v", tc.uri, id, path, ok, tc.id, tc.path, tc.ok)
		}
		if ok && tc.uri != ResourceScheme+"://"+id && !strings.HasPrefix(tc.uri, ResourceURI(id, "")) {
			t.Errorf("ResourceURI(%q) does not prefix %q", id, tc.uri)
		}
	}
}

func TestComputerResult(t *testing.T) {
	t.Parallel()
	shot := base64.StdEncoding.EncodeToString([]byte("\x89PNG a"))
	after := base64.StdEncoding.EncodeToString([]byte("\x89PNG b"))
	res, out := computerResult(&api.ComputerActionsResult{OK: false, Completed: 1, Display: api.DisplaySize{Width: 1024, Height: 768}, Screenshot: after,
		Results: []api.ComputerStepResult{{Index: 0, Action: "screenshot", OK: true, Screenshot: shot}, {Index: 1, Action: "left_click", OK: false, Error: "off the display"}}})
	if out.OK || out.Completed != 1 || out.Width != 1024 || len(out.Results) != 2 || out.Results[0].Image != 1 || out.Results[1].Error == "" {
		t.Errorf("out %+v", out)
	}
	if len(res.Content) != 3 {
		t.Fatalf("content %+v", res.Content)
	}
	text := res.Content[0].(*sdk.TextContent).Text
	if !strings.Contains(text, "1 left_click failed: off the display") || !strings.Contains(text, "image 2") {
		t.Errorf("text %q", text)
	}
	if img := res.Content[2].(*sdk.ImageContent); string(img.Data) != "\x89PNG b" {
		t.Errorf("the last image %q", img.Data)
	}
}

// TestOwnAfterEnd: a sandbox made while its session ended ends too.
func TestOwnAfterEnd(t *testing.T) {
	t.Parallel()
	sbx := &fakeSandboxes{}
	s, err := New(Config{Sandboxes: sbx, Jobs: unusedJobs{}, Files: unusedFiles{}})
	if err != nil {
		t.Fatal(err)
	}
	se := &session{p: tenant.Principal{Tenant: "a"}, owned: map[string]bool{}, contexts: map[contextKey]string{}}
	s.end(se)
	s.own(se, nil, "sbx_late")
	if err := s.Close(); err != nil { // waits for the ends under way
		t.Fatal(err)
	}
	if got := sbx.deletes(); !slices.Equal(got, []string{"a/sbx_late"}) {
		t.Errorf("deletes %v", got)
	}
}
