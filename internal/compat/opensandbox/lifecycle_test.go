package opensandbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/compat/opensandbox"
	"genesis.dev/sandbox/internal/config"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/controltest"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/tenant"
)

// server is the adapter over a control harness, reached over HTTP with
// the key "key-a" of tenant a.
type server struct {
	h   *controltest.Harness
	url string
}

// newServer starts the adapter over a harness whose test profile has a
// warm runc pool of one member; images maps "ubuntu" to the test profile.
func newServer(t *testing.T) *server {
	t.Helper()
	h := controltest.New(t, func(c *config.Config) {
		c.WarmPools = true
		c.Intervals.PoolCheck = time.Hour
		for i := range c.Profiles {
			if c.Profiles[i].Name == controltest.Profile {
				c.Profiles[i].Pools = []config.PoolSpec{{Runtime: sandbox.RuntimeRunc, MinIdle: 1, MaxTotal: 3}}
			}
		}
	})
	a, err := opensandbox.New(opensandbox.Config{Control: h.Svc, Jobs: h.Jobs, Files: h.Files,
		Settings: config.OpenSandbox{Images: map[string]string{"ubuntu": controltest.Profile}}})
	if err != nil {
		t.Fatal(err)
	}
	a.Bind(opensandbox.Edge{Authenticate: func(_ context.Context, key string) (tenant.Principal, error) {
		if key == "key-a" {
			return tenant.Principal{Tenant: "a", KeyID: "key_a"}, nil
		}
		return tenant.Principal{}, fmt.Errorf("unknown key: %w", errdefs.ErrUnauthenticated)
	}})
	mux := http.NewServeMux()
	for _, r := range a.Routes() {
		mux.HandleFunc(r.Method+" "+r.Pattern, r.Handler)
	}
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return &server{h: h, url: ts.URL + opensandbox.Prefix + "/v1"}
}

// call sends a lifecycle request with tenant a's key and decodes the
// JSON answer into out (when not nil).
func (s *server) call(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("OPEN-SANDBOX-API-KEY", "key-a")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// waitIdle polls until the test pool holds an idle member and returns
// that member's record.
func (s *server) waitIdle(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, sb := range s.h.Records() {
			if sb.State == sandbox.StateIdle && sb.Tenant == "" {
				return sb
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the pool never held an idle member")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// tenantRecords counts the sandboxes of tenant a, in any state.
func (s *server) tenantRecords() int {
	n := 0
	for _, sb := range s.h.Records() {
		if sb.Tenant == "a" {
			n++
		}
	}
	return n
}

type sandboxInfo struct {
	ID        string `json:"id"`
	CreatedAt string `json:"createdAt"`
	Image     struct {
		URI string `json:"uri"`
	} `json:"image"`
	Status struct {
		State string `json:"state"`
	} `json:"status"`
}

// TestCreatedAtIsTheCreate: a sandbox handed out warm from a pool
// answers createdAt = the time of the SDK's create (its lease), in the
// create answer, get and list, not the hour-older birth of the member.
func TestCreatedAtIsTheCreate(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	member := s.waitIdle(t)
	s.h.Clock.Advance(time.Hour)
	before := s.h.Clock.Now()

	var created sandboxInfo
	if code := s.call(t, "POST", "/sandboxes", `{"image":{"uri":"ubuntu"},"timeout":120}`, &created); code != http.StatusAccepted {
		t.Fatalf("create: %d %+v", code, created)
	}
	after := s.h.Clock.Now()
	if created.ID != member.ID {
		t.Fatalf("create made %s, not the warm member %s (a cold create proves nothing here)", created.ID, member.ID)
	}
	if created.Image.URI != "ubuntu" || created.Status.State != "Running" {
		t.Errorf("create answered %+v", created)
	}
	if rec := s.h.Record(created.ID); rec.Profile != controltest.Profile || !rec.CreatedAt.Before(before.Add(-30*time.Minute)) {
		t.Fatalf("the member's record: profile %s, created %v (want an hour before %v)", rec.Profile, rec.CreatedAt, before)
	}
	check := func(what, got string) {
		t.Helper()
		at, err := time.Parse(time.RFC3339Nano, got)
		if err != nil || at.Before(before) || at.After(after) {
			t.Errorf("%s: createdAt %q, want the create's time in [%v, %v]", what, got, before.UTC(), after.UTC())
		}
	}
	check("create", created.CreatedAt)
	var got sandboxInfo
	if code := s.call(t, "GET", "/sandboxes/"+created.ID, "", &got); code != http.StatusOK {
		t.Fatalf("get: %d", code)
	}
	check("get", got.CreatedAt)
	var list struct {
		Items []sandboxInfo `json:"items"`
	}
	if code := s.call(t, "GET", "/sandboxes", "", &list); code != http.StatusOK || len(list.Items) != 1 || list.Items[0].ID != created.ID {
		t.Fatalf("list: %d %+v", code, list)
	}
	check("list", list.Items[0].CreatedAt)

	// Killed, it is still listed on request, with the same createdAt.
	if code := s.call(t, "DELETE", "/sandboxes/"+created.ID, "", nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d", code)
	}
	if code := s.call(t, "GET", "/sandboxes/"+created.ID, "", &got); code != http.StatusOK || got.Status.State != "Terminated" {
		t.Fatalf("get after delete: %d %+v", code, got)
	}
	check("get after delete", got.CreatedAt)
}

// TestCreatedAtWithoutLease: a sandbox made through /v1 (no lease)
// answers its own creation.
func TestCreatedAtWithoutLease(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	sb := s.h.Create("a", control.CreateSandboxInput{Runtime: "runc"})
	var got sandboxInfo
	if code := s.call(t, "GET", "/sandboxes/"+sb.ID, "", &got); code != http.StatusOK {
		t.Fatalf("get: %d", code)
	}
	if got.CreatedAt != sb.CreatedAt.UTC().Format(time.RFC3339Nano) {
		t.Errorf("createdAt %q, want the sandbox's own %v", got.CreatedAt, sb.CreatedAt)
	}
}

// TestImages: the table maps images to profiles; a profile's own name
// selects it; anything else is 400 INVALID_IMAGE naming both ways, and
// creates nothing.
func TestImages(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.waitIdle(t)
	var created sandboxInfo
	if code := s.call(t, "POST", "/sandboxes", `{"image":{"uri":"ubuntu"},"timeout":120}`, &created); code != http.StatusAccepted {
		t.Fatalf("create ubuntu: %d", code)
	}
	if rec := s.h.Record(created.ID); rec.Profile != controltest.Profile || created.Image.URI != "ubuntu" {
		t.Errorf("ubuntu made a sandbox of %s shown as %q", rec.Profile, created.Image.URI)
	}
	if code := s.call(t, "POST", "/sandboxes", `{"image":{"uri":"`+controltest.Profile+`"},"timeout":120}`, &created); code != http.StatusAccepted {
		t.Fatalf("create with a profile's name as the image: %d", code)
	}
	if rec := s.h.Record(created.ID); rec.Profile != controltest.Profile || created.Image.URI != controltest.Profile {
		t.Errorf("%s made a sandbox of %s shown as %q", controltest.Profile, rec.Profile, created.Image.URI)
	}
	n := s.tenantRecords()
	for _, img := range []string{"tool-basic-not-here", "alpine", "ubuntu:99"} {
		var e struct{ Code, Message string }
		if code := s.call(t, "POST", "/sandboxes", `{"image":{"uri":"`+img+`"}}`, &e); code != http.StatusBadRequest || e.Code != "INVALID_IMAGE" ||
			!strings.Contains(e.Message, "ubuntu") || !strings.Contains(e.Message, "genesis profiles") {
			t.Errorf("image %s: %d %+v", img, code, e)
		}
	}
	if s.tenantRecords() != n {
		t.Errorf("refused creates made sandboxes: tenant a has %d, had %d", s.tenantRecords(), n)
	}
}
