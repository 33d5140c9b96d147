package apiwire

import (
	"net/url"
	"slices"
	"testing"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// TestAuditFilter: each query parameter of GET /v1/audit lands in its
// field, and a bad value is an invalid argument that names it.
func TestAuditFilter(t *testing.T) {
	t.Parallel()
	f, err := AuditFilter(url.Values{"tenant": {"t1"}, "action": {"POST /v1/sandboxes"}, "since": {"2026-01-02T03:04:05Z"},
		"limit": {"7"}, "order": {"newest"}, "cursor": {"42"}, "result": {"4xx"}})
	if err != nil {
		t.Fatal(err)
	}
	if f.Tenant != "t1" || f.Action != "POST /v1/sandboxes" || f.Since.IsZero() || f.Limit != 7 || !f.Newest || f.BeforeSeq != 42 || f.AfterSeq != 0 || f.StatusClass != 4 {
		t.Errorf("filter %+v", f)
	}
	if f, _ := AuditFilter(url.Values{}); f.Limit != auditDefaultLimit || f.Newest {
		t.Errorf("default filter %+v", f)
	}
	if f, _ := AuditFilter(url.Values{"result": {"not_found"}, "cursor": {"3"}}); f.Code != "not_found" || f.AfterSeq != 3 {
		t.Errorf("code and oldest-first cursor: %+v", f)
	}
	for _, q := range []url.Values{
		{"limit": {"0"}}, {"limit": {"1001"}}, {"order": {"sideways"}}, {"cursor": {"-1"}},
		{"since": {"yesterday"}}, {"result": {"600"}}, {"result": {"Bad Code"}},
	} {
		if _, err := AuditFilter(q); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%v: %v, want an invalid argument", q, err)
		}
	}
}

// TestListFilters: the sandbox and job list queries.
func TestListFilters(t *testing.T) {
	t.Parallel()
	f, err := SandboxFilter("t1", url.Values{"profile": {"python"}, "state": {"ready,paused", "stopped"}, "metadata": {"a=1", "b="}})
	if err != nil {
		t.Fatal(err)
	}
	if f.Tenant != "t1" || f.Profile != "python" || len(f.States) != 3 || f.Metadata["a"] != "1" || f.Metadata["b"] != "" || len(f.Metadata) != 2 {
		t.Errorf("sandbox filter %+v", f)
	}
	if _, err := SandboxFilter("t1", url.Values{"metadata": {"=x"}}); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("metadata without a key: %v", err)
	}
	states, limit, err := JobFilter(url.Values{"state": {"running,exited"}, "limit": {"5"}})
	if err != nil || limit != 5 || !slices.Equal(states, []sandbox.JobState{"running", "exited"}) {
		t.Errorf("job filter %v %d %v", states, limit, err)
	}
	if _, _, err := JobFilter(url.Values{"limit": {"five"}}); !errdefs.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("limit five: %v", err)
	}
}
