package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// recorded is what the test server saw of one request.
type recorded struct {
	Method string
	Path   string // escaped path
	Query  map[string][]string
	Header http.Header
	Body   string
}

// answer is what the test server replies.
type answer struct {
	Status      int
	ContentType string
	Header      map[string]string
	Body        string
}

// fakeServer serves canned answers and records requests.
type fakeServer struct {
	mu   sync.Mutex
	reqs []recorded
	ans  answer
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, recorded{
		Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.Query(),
		Header: r.Header.Clone(), Body: string(b),
	})
	a := f.ans
	f.mu.Unlock()
	ct := a.ContentType
	if ct == "" {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	for k, v := range a.Header {
		w.Header().Set(k, v)
	}
	st := a.Status
	if st == 0 {
		st = http.StatusOK
	}
	w.WriteHeader(st)
	_, _ = io.WriteString(w, a.Body)
}

func (f *fakeServer) last(t *testing.T) recorded {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.reqs) == 0 {
		t.Fatal("server saw no request")
	}
	return f.reqs[len(f.reqs)-1]
}

func newTestClient(t *testing.T, a answer, opts ...Option) (*Client, *fakeServer) {
	t.Helper()
	f := &fakeServer{ans: a}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	// Each test server gets its own transport: httptest.Server.Close closes
	// the idle connections of http.DefaultTransport, which would break a
	// parallel test's request on a connection it is about to use.
	return New(srv.URL+"/", "key-123", append([]Option{WithHTTPClient(srv.Client())}, opts...)...), f
}

func TestRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sandboxJSON := `{"id":"sb-1","state":"ready","profile":"tool-basic","resourceVersion":"7","metadata":{}}`
	tests := []struct {
		name       string
		ans        answer
		call       func(c *Client) (any, error)
		wantMethod string
		wantPath   string
		wantQuery  map[string][]string
		wantHeader map[string]string // "" value: header must be absent
		wantBody   string            // JSON, compared semantically; "" means no body
		check      func(t *testing.T, got any)
	}{
		{
			name:       "health has no auth",
			ans:        answer{Body: `{"status":"ok"}`},
			call:       func(c *Client) (any, error) { return c.Health(ctx) },
			wantMethod: "GET", wantPath: "/healthz",
			wantHeader: map[string]string{"Authorization": ""},
			check: func(t *testing.T, got any) {
				if got.(*Health).Status != "ok" {
					t.Errorf("status = %q", got.(*Health).Status)
				}
			},
		},
		{
			name:       "capabilities sends bearer key",
			ans:        answer{Body: `{"driver":"docker","healthy":true,"runtimes":[{"name":"runc","healthy":true}]}`},
			call:       func(c *Client) (any, error) { return c.Capabilities(ctx) },
			wantMethod: "GET", wantPath: "/v1/capabilities",
			wantHeader: map[string]string{"Authorization": "Bearer key-123", "User-Agent": "genesis-go-client"},
			check: func(t *testing.T, got any) {
				c := got.(*Capabilities)
				if c.Driver != "docker" || len(c.Runtimes) != 1 || c.Runtimes[0].Name != "runc" {
					t.Errorf("capabilities = %+v", c)
				}
			},
		},
		{
			name:       "profiles",
			ans:        answer{Body: `{"items":[{"name":"tool-basic","image_status":"present"}]}`},
			call:       func(c *Client) (any, error) { return c.Profiles(ctx) },
			wantMethod: "GET", wantPath: "/v1/profiles",
			check: func(t *testing.T, got any) {
				if l := got.(*ProfileList); len(l.Items) != 1 || l.Items[0].ImageStatus != "present" {
					t.Errorf("profiles = %+v", l)
				}
			},
		},
		{
			name: "create with idempotency key",
			ans:  answer{Status: 201, Body: sandboxJSON, Header: map[string]string{"ETag": `"7"`}},
			call: func(c *Client) (any, error) {
				return c.CreateSandbox(ctx, CreateSandboxRequest{
					Profile: "tool-basic", Runtime: "runsc", Resources: &Resources{MemoryMB: 256},
					Env: map[string]string{"A": "1"}, TTLSeconds: 600,
				}, "idem-1")
			},
			wantMethod: "POST", wantPath: "/v1/sandboxes",
			wantHeader: map[string]string{"Idempotency-Key": "idem-1", "Content-Type": "application/json"},
			wantBody:   `{"profile":"tool-basic","runtime":"runsc","resources":{"memory_mb":256},"env":{"A":"1"},"ttl_seconds":600}`,
			check: func(t *testing.T, got any) {
				if s := got.(*Sandbox); s.ID != "sb-1" || s.ResourceVersion != "7" {
					t.Errorf("sandbox = %+v", s)
				}
			},
		},
		{
			name:       "create without idempotency key",
			ans:        answer{Status: 201, Body: sandboxJSON},
			call:       func(c *Client) (any, error) { return c.CreateSandbox(ctx, CreateSandboxRequest{Profile: "p"}, "") },
			wantMethod: "POST", wantPath: "/v1/sandboxes",
			wantHeader: map[string]string{"Idempotency-Key": ""},
			wantBody:   `{"profile":"p"}`,
		},
		{
			name: "list encodes repeated filters",
			ans:  answer{Body: `{"items":[` + sandboxJSON + `]}`},
			call: func(c *Client) (any, error) {
				return c.ListSandboxes(ctx, ListSandboxesOptions{
					States:   []string{"ready", "idle"},
					Profile:  "tool-basic",
					Metadata: map[string]string{"team": "a&b", "owner": "x=y"},
				})
			},
			wantMethod: "GET", wantPath: "/v1/sandboxes",
			wantQuery: map[string][]string{
				"state":    {"ready", "idle"},
				"profile":  {"tool-basic"},
				"metadata": {"owner=x=y", "team=a&b"},
			},
			check: func(t *testing.T, got any) {
				if l := got.(*SandboxList); len(l.Items) != 1 {
					t.Errorf("items = %d", len(l.Items))
				}
			},
		},
		{
			name:       "list without filters has no query",
			ans:        answer{Body: `{"items":[]}`},
			call:       func(c *Client) (any, error) { return c.ListSandboxes(ctx, ListSandboxesOptions{}) },
			wantMethod: "GET", wantPath: "/v1/sandboxes",
			wantQuery: map[string][]string{},
		},
		{
			name:       "get escapes id",
			ans:        answer{Body: sandboxJSON},
			call:       func(c *Client) (any, error) { return c.GetSandbox(ctx, "a/b c") },
			wantMethod: "GET", wantPath: "/v1/sandboxes/a%2Fb%20c",
		},
		{
			name: "patch quotes bare if-match",
			ans:  answer{Body: sandboxJSON},
			call: func(c *Client) (any, error) {
				v := "x"
				return c.PatchSandbox(ctx, "sb-1", PatchSandboxRequest{Metadata: map[string]*string{"a": &v, "gone": nil}}, "7")
			},
			wantMethod: "PATCH", wantPath: "/v1/sandboxes/sb-1",
			wantHeader: map[string]string{"If-Match": `"7"`},
			wantBody:   `{"metadata":{"a":"x","gone":null}}`,
		},
		{
			name: "patch keeps quoted if-match",
			ans:  answer{Body: sandboxJSON},
			call: func(c *Client) (any, error) {
				return c.PatchSandbox(ctx, "sb-1", PatchSandboxRequest{Metadata: map[string]*string{}}, `"7"`)
			},
			wantMethod: "PATCH", wantPath: "/v1/sandboxes/sb-1",
			wantHeader: map[string]string{"If-Match": `"7"`},
			wantBody:   `{"metadata":{}}`,
		},
		{
			name: "patch without if-match",
			ans:  answer{Body: sandboxJSON},
			call: func(c *Client) (any, error) {
				return c.PatchSandbox(ctx, "sb-1", PatchSandboxRequest{}, "")
			},
			wantMethod: "PATCH", wantPath: "/v1/sandboxes/sb-1",
			wantHeader: map[string]string{"If-Match": ""},
			wantBody:   `{"metadata":null}`,
		},
		{
			name:       "delete 204",
			ans:        answer{Status: 204},
			call:       func(c *Client) (any, error) { return nil, c.DeleteSandbox(ctx, "sb-1") },
			wantMethod: "DELETE", wantPath: "/v1/sandboxes/sb-1",
		},
		{
			name: "exec",
			ans:  answer{Body: `{"job_id":"j-1","exit_code":3,"exit_reason":"exited","stdout":"hi\n","stderr":""}`},
			call: func(c *Client) (any, error) {
				return c.Exec(ctx, "sb-1", ExecRequest{Command: []string{"sh", "-c", "exit 3"}, TimeoutMS: 500})
			},
			wantMethod: "POST", wantPath: "/v1/sandboxes/sb-1/exec",
			wantBody: `{"command":["sh","-c","exit 3"],"timeout_ms":500}`,
			check: func(t *testing.T, got any) {
				if r := got.(*ExecResult); r.ExitCode != 3 || r.Stdout != "hi\n" || r.JobID != "j-1" {
					t.Errorf("result = %+v", r)
				}
			},
		},
		{
			name:       "job",
			ans:        answer{Body: `{"id":"j-1","sandbox_id":"sb-1","state":"failed","exit_code":3}`},
			call:       func(c *Client) (any, error) { return c.GetJob(ctx, "j-1") },
			wantMethod: "GET", wantPath: "/v1/jobs/j-1",
			check: func(t *testing.T, got any) {
				if j := got.(*Job); j.ExitCode == nil || *j.ExitCode != 3 {
					t.Errorf("job = %+v", j)
				}
			},
		},
		{
			name: "start job sets background",
			ans:  answer{Status: 202, Body: `{"id":"job-1","sandbox_id":"sb-1","state":"running","mode":"background"}`},
			call: func(c *Client) (any, error) {
				return c.StartJob(ctx, "sb-1", ExecRequest{Script: "sleep 1", StdinBase64: "/wA="})
			},
			wantMethod: "POST", wantPath: "/v1/sandboxes/sb-1/exec",
			wantBody: `{"script":"sleep 1","stdin_base64":"/wA=","background":true}`,
			check: func(t *testing.T, got any) {
				if j := got.(*Job); j.ID != "job-1" || j.Mode != "background" {
					t.Errorf("job = %+v", j)
				}
			},
		},
		{
			name:       "cancel job",
			ans:        answer{Status: 202, Body: `{"id":"job-1","state":"running","mode":"background"}`},
			call:       func(c *Client) (any, error) { return c.CancelJob(ctx, "job-1") },
			wantMethod: "POST", wantPath: "/v1/jobs/job-1/cancel",
		},
		{
			name:       "create session has no body",
			ans:        answer{Status: 201, Body: `{"id":"ses-1","sandbox_id":"sb-1","kind":"shell","state":"active","runs":0}`},
			call:       func(c *Client) (any, error) { return c.CreateSession(ctx, "sb-1") },
			wantMethod: "POST", wantPath: "/v1/sandboxes/sb-1/sessions",
			check: func(t *testing.T, got any) {
				if s := got.(*Session); s.ID != "ses-1" || s.Kind != "shell" {
					t.Errorf("session = %+v", s)
				}
			},
		},
		{
			name:       "get session",
			ans:        answer{Body: `{"id":"ses-1","runs":2}`},
			call:       func(c *Client) (any, error) { return c.GetSession(ctx, "ses-1") },
			wantMethod: "GET", wantPath: "/v1/sessions/ses-1",
		},
		{
			name: "session exec",
			ans:  answer{Body: `{"job_id":"j-2","exit_code":0,"exit_reason":"exited","stdout":"/tmp\n","stderr":""}`},
			call: func(c *Client) (any, error) {
				return c.SessionExec(ctx, "ses-1", ExecRequest{Command: []string{"pwd"}})
			},
			wantMethod: "POST", wantPath: "/v1/sessions/ses-1/exec",
			wantBody: `{"command":["pwd"]}`,
			check: func(t *testing.T, got any) {
				if r := got.(*ExecResult); r.Stdout != "/tmp\n" {
					t.Errorf("result = %+v", r)
				}
			},
		},
		{
			name:       "delete session",
			ans:        answer{Status: 204},
			call:       func(c *Client) (any, error) { return nil, c.DeleteSession(ctx, "ses-1") },
			wantMethod: "DELETE", wantPath: "/v1/sessions/ses-1",
		},
		{
			name: "create context",
			ans:  answer{Status: 201, Body: `{"id":"ctx-1","sandbox_id":"sb-1","kind":"python","state":"active"}`},
			call: func(c *Client) (any, error) {
				return c.CreateContext(ctx, "sb-1", CreateContextRequest{Language: "python"})
			},
			wantMethod: "POST", wantPath: "/v1/sandboxes/sb-1/contexts",
			wantBody: `{"language":"python"}`,
		},
		{
			name:       "get context",
			ans:        answer{Body: `{"id":"ctx-1","kind":"python"}`},
			call:       func(c *Client) (any, error) { return c.GetContext(ctx, "ctx-1") },
			wantMethod: "GET", wantPath: "/v1/contexts/ctx-1",
		},
		{
			name: "run code",
			ans: answer{Body: `{"job_id":"j-3","status":"error","stdout":"","stderr":"","value":"3",
				"error":{"ename":"ZeroDivisionError","evalue":"division by zero","traceback":["Traceback\n"]},
				"outputs":[{"mime":"image/png","data":"iVBO"}],"duration_ms":4}`},
			call: func(c *Client) (any, error) {
				return c.RunCode(ctx, "ctx-1", RunCodeRequest{Code: "1/0", TimeoutMS: 1000})
			},
			wantMethod: "POST", wantPath: "/v1/contexts/ctx-1/run",
			wantBody: `{"code":"1/0","timeout_ms":1000}`,
			check: func(t *testing.T, got any) {
				r := got.(*RunCodeResult)
				if r.Status != "error" || r.Error == nil || r.Error.Name != "ZeroDivisionError" || r.Value == nil || *r.Value != "3" ||
					len(r.Outputs) != 1 || r.Outputs[0].MIME != "image/png" {
					t.Errorf("result = %+v", r)
				}
			},
		},
		{
			name:       "delete context",
			ans:        answer{Status: 204},
			call:       func(c *Client) (any, error) { return nil, c.DeleteContext(ctx, "ctx-1") },
			wantMethod: "DELETE", wantPath: "/v1/contexts/ctx-1",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, f := newTestClient(t, tc.ans)
			got, err := tc.call(c)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			r := f.last(t)
			if r.Method != tc.wantMethod || r.Path != tc.wantPath {
				t.Errorf("request = %s %s, want %s %s", r.Method, r.Path, tc.wantMethod, tc.wantPath)
			}
			if tc.wantQuery != nil && !reflect.DeepEqual(r.Query, tc.wantQuery) {
				t.Errorf("query = %v, want %v", r.Query, tc.wantQuery)
			}
			for k, want := range tc.wantHeader {
				if got := r.Header.Get(k); got != want {
					t.Errorf("header %s = %q, want %q", k, got, want)
				}
			}
			if strings.HasPrefix(tc.wantPath, "/v1/") && r.Header.Get("Authorization") != "Bearer key-123" {
				t.Errorf("Authorization = %q", r.Header.Get("Authorization"))
			}
			assertJSONEqual(t, r.Body, tc.wantBody)
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

func assertJSONEqual(t *testing.T, got, want string) {
	t.Helper()
	if want == "" {
		if got != "" {
			t.Errorf("body = %q, want none", got)
		}
		return
	}
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("body %q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %q: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("body = %s, want %s", got, want)
	}
}

func TestProblemDecoding(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		ans         answer
		wantStatus  int
		wantCode    string
		wantReqID   string
		wantMsg     string
		wantMissing bool
	}{
		{
			name: "problem json with header request id",
			ans: answer{
				Status: 409, ContentType: "application/problem+json",
				Header: map[string]string{"X-Request-ID": "req-h"},
				Body:   `{"title":"Conflict","status":409,"code":"runtime_unavailable","detail":"runsc is not installed","request_id":"req-b"}`,
			},
			wantStatus: 409, wantCode: "runtime_unavailable", wantReqID: "req-h",
			wantMsg: "409 runtime_unavailable: runsc is not installed",
		},
		{
			name: "request id from body when header missing",
			ans: answer{
				Status: 404, ContentType: "application/problem+json",
				Body: `{"title":"Not Found","status":404,"code":"not_found","request_id":"req-b"}`,
			},
			wantStatus: 404, wantCode: "not_found", wantReqID: "req-b",
			wantMsg: "404 not_found: Not Found", wantMissing: true,
		},
		{
			name:       "non-problem body",
			ans:        answer{Status: 502, ContentType: "text/html", Body: "<html>\n bad   gateway </html>"},
			wantStatus: 502, wantCode: "",
			wantMsg: "502 bad_gateway: <html> bad gateway </html>",
		},
		{
			name:       "client closed, no body",
			ans:        answer{Status: 499},
			wantStatus: 499, wantCode: "",
			wantMsg: "499 client_closed_request: Client Closed Request",
		},
		{
			name:       "empty body",
			ans:        answer{Status: 401},
			wantStatus: 401, wantCode: "",
			wantMsg: "401 unauthorized: Unauthorized",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _ := newTestClient(t, tc.ans)
			_, err := c.GetSandbox(context.Background(), "sb-1")
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v (%T), want *APIError", err, err)
			}
			if ae.Status != tc.wantStatus || ae.RequestID != tc.wantReqID {
				t.Errorf("status %d request id %q, want %d %q", ae.Status, ae.RequestID, tc.wantStatus, tc.wantReqID)
			}
			if got := ErrorCode(err); got != tc.wantCode {
				t.Errorf("ErrorCode = %q, want %q", got, tc.wantCode)
			}
			if err.Error() != tc.wantMsg {
				t.Errorf("Error() = %q, want %q", err.Error(), tc.wantMsg)
			}
			if IsNotFound(err) != tc.wantMissing {
				t.Errorf("IsNotFound = %v", IsNotFound(err))
			}
		})
	}
}

func TestErrorHelpersOnOtherErrors(t *testing.T) {
	t.Parallel()
	wrapped := errors.Join(errors.New("ctx"), &APIError{Status: 404, Problem: Problem{Code: "not_found"}})
	if !IsNotFound(wrapped) || ErrorCode(wrapped) != "not_found" {
		t.Errorf("helpers do not unwrap: %v %q", IsNotFound(wrapped), ErrorCode(wrapped))
	}
	stale := fmt.Errorf("patch: %w", &APIError{Status: 412, Problem: Problem{Code: "precondition_failed"}})
	if !IsPreconditionFailed(stale) || IsPreconditionFailed(wrapped) || IsNotFound(stale) {
		t.Errorf("IsPreconditionFailed(412) = %v, (404) = %v", IsPreconditionFailed(stale), IsPreconditionFailed(wrapped))
	}
	plain := errors.New("boom")
	if IsNotFound(plain) || ErrorCode(plain) != "" || IsNotFound(nil) || IsPreconditionFailed(plain) {
		t.Error("helpers misreport a non-API error")
	}
}

func TestDeleteNotFound(t *testing.T) {
	t.Parallel()
	c, _ := newTestClient(t, answer{Status: 404, ContentType: "application/problem+json", Body: `{"title":"Not Found","status":404,"code":"not_found"}`})
	if err := c.DeleteSandbox(context.Background(), "nope"); !IsNotFound(err) {
		t.Fatalf("err = %v, want not found", err)
	}
}

func TestReady(t *testing.T) {
	t.Parallel()
	c, _ := newTestClient(t, answer{Body: `{"status":"ok","checks":{"store":"ok"}}`})
	h, err := c.Ready(context.Background())
	if err != nil || h.Status != "ok" || h.Checks["store"] != "ok" {
		t.Fatalf("ready = %+v, %v", h, err)
	}

	c, _ = newTestClient(t, answer{Status: 503, Body: `{"status":"unavailable","checks":{"store":"ok","driver":"docker unreachable"}}`})
	h, err = c.Ready(context.Background())
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 503 || ae.Problem.Code != "unavailable" {
		t.Fatalf("err = %v, want 503 APIError", err)
	}
	if h == nil || h.Status != "unavailable" || h.Checks["driver"] != "docker unreachable" {
		t.Fatalf("health = %+v", h)
	}
	if !strings.Contains(ae.Error(), "driver: docker unreachable") || strings.Contains(ae.Error(), "store") {
		t.Errorf("message = %q", ae.Error())
	}

	c, _ = newTestClient(t, answer{Status: 503, ContentType: "application/problem+json", Body: `{"title":"Service Unavailable","status":503,"code":"unavailable","detail":"draining"}`})
	h, err = c.Ready(context.Background())
	if h != nil || ErrorCode(err) != "unavailable" || !strings.Contains(err.Error(), "draining") {
		t.Fatalf("problem 503: %+v, %v", h, err)
	}
}

func TestOptionsAndBaseURL(t *testing.T) {
	t.Parallel()
	f := &fakeServer{ans: answer{Body: `{"items":[]}`}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	var used bool
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		used = true
		return srv.Client().Transport.RoundTrip(r)
	})}
	c := New(srv.URL+"/prefix/", "", WithHTTPClient(hc), WithUserAgent("genesis-cli/1"))
	if _, err := c.Profiles(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := f.last(t)
	if !used {
		t.Error("custom HTTP client not used")
	}
	if r.Path != "/prefix/v1/profiles" {
		t.Errorf("path = %q", r.Path)
	}
	if r.Header.Get("User-Agent") != "genesis-cli/1" {
		t.Errorf("User-Agent = %q", r.Header.Get("User-Agent"))
	}
	if _, ok := r.Header["Authorization"]; ok {
		t.Error("empty key sent an Authorization header")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := New("ftp://x", "k").Profiles(ctx); err == nil {
		t.Error("ftp URL accepted")
	}
	if _, err := New("127.0.0.1:8080", "k").Profiles(ctx); err == nil {
		t.Error("URL without scheme accepted")
	}
	c, f := newTestClient(t, answer{Body: `{}`})
	if _, err := c.GetSandbox(ctx, ""); err == nil {
		t.Error("empty id accepted")
	}
	if err := c.DeleteSandbox(ctx, ""); err == nil {
		t.Error("empty id accepted by delete")
	}
	if len(f.reqs) != 0 {
		t.Errorf("server saw %d requests for invalid input", len(f.reqs))
	}
}

func TestDecodeErrorOnBadJSON(t *testing.T) {
	t.Parallel()
	c, _ := newTestClient(t, answer{Body: `{"id":`})
	_, err := c.GetSandbox(context.Background(), "sb-1")
	var ae *APIError
	if err == nil || errors.As(err, &ae) {
		t.Fatalf("err = %v, want decode error", err)
	}
}

func TestFromEnv(t *testing.T) {
	f := &fakeServer{ans: answer{Body: `{"items":[]}`}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)

	t.Setenv(EnvURL, srv.URL)
	t.Setenv(EnvAPIKey, "env-key")
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Profiles(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.last(t).Header.Get("Authorization"); got != "Bearer env-key" {
		t.Errorf("Authorization = %q", got)
	}

	t.Setenv(EnvURL, "")
	c, err = FromEnv()
	if err != nil || c.baseURL != DefaultURL {
		t.Errorf("default URL: %v %q", err, c.baseURL)
	}

	t.Setenv(EnvURL, "not a url")
	if _, err := FromEnv(); err == nil {
		t.Error("bad GENESIS_URL accepted")
	}
}

// TestResourceVersionNames: the version is sent as resource_version and,
// for clients that read the former name, resourceVersion; either is read.
func TestResourceVersionNames(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(Sandbox{ID: "sbx_1", ResourceVersion: "7", Metadata: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["resource_version"] != "7" || m["resourceVersion"] != "7" || m["id"] != "sbx_1" {
		t.Errorf("sandbox JSON %s; want resource_version and resourceVersion 7 beside the other fields", b)
	}
	for _, in := range []string{`{"resource_version":"3"}`, `{"resourceVersion":"3"}`, `{"resource_version":"3","resourceVersion":"2"}`} {
		var s Sandbox
		var l Lease
		var n SandboxNetwork
		for _, v := range []any{&s, &l, &n} {
			if err := json.Unmarshal([]byte(in), v); err != nil {
				t.Fatal(err)
			}
		}
		if s.ResourceVersion != "3" || l.ResourceVersion != "3" || n.ResourceVersion != "3" {
			t.Errorf("%s read as %q, %q, %q; want 3", in, s.ResourceVersion, l.ResourceVersion, n.ResourceVersion)
		}
	}
	lb, _ := json.Marshal(Lease{LeaseID: "l", ResourceVersion: "4", Sandbox: &Sandbox{ID: "s", ResourceVersion: "5"}})
	if !strings.Contains(string(lb), `"resource_version":"4"`) || !strings.Contains(string(lb), `"resourceVersion":"4"`) ||
		!strings.Contains(string(lb), `"resourceVersion":"5"`) {
		t.Errorf("lease JSON %s", lb)
	}
	nb, _ := json.Marshal(SandboxNetwork{SandboxID: "s", ResourceVersion: "6"})
	if !strings.Contains(string(nb), `"resource_version":"6"`) || !strings.Contains(string(nb), `"resourceVersion":"6"`) {
		t.Errorf("network JSON %s", nb)
	}
}
