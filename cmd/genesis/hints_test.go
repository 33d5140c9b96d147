package main

import (
	"net"
	"regexp"
	"strings"
	"testing"

	"genesis.dev/sandbox/client"
)

// route matches an HTTP route as a hint must never name one.
var route = regexp.MustCompile(`\b(GET|POST|PUT|PATCH|DELETE) /|/v1/`)

// TestErrorHints: the errors a person meets first end with a hint that
// names a command, flag or environment variable, never an HTTP route.
func TestErrorHints(t *testing.T) {
	t.Parallel()
	// An address nothing listens on: a listener closed at once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()

	cases := []struct {
		name       string
		url        string // "" for the fake API
		answer     *fakeAPI
		env        map[string]string
		args       []string
		msg, hint  string
		notInError string
	}{
		{
			name:   "no API key",
			answer: newFakeAPI(t, problem(401, "unauthenticated", "no API key: send the header Authorization: Bearer <api key>")),
			env:    map[string]string{client.EnvAPIKey: ""},
			args:   []string{"sandbox", "ls"},
			msg:    "genesis: no API key was given (unauthenticated, request id req-42)",
			hint:   "hint: set GENESIS_API_KEY or pass --api-key",
		},
		{
			name:   "wrong API key",
			answer: newFakeAPI(t, problem(401, "unauthenticated", "invalid API key")),
			args:   []string{"sandbox", "ls"},
			msg:    "genesis: invalid API key (unauthenticated",
			hint:   "did not accept the key of GENESIS_API_KEY or --api-key",
		},
		{
			name:   "unknown profile",
			answer: newFakeAPI(t, problem(404, "profile_not_found", `unknown profile "nope"; the profiles are tool-basic`)),
			args:   []string{"sandbox", "create", "--profile", "nope"},
			msg:    `genesis: unknown profile "nope"; the profiles are tool-basic (profile_not_found`,
			hint:   "hint: `genesis profiles` lists the profiles",
		},
		{
			name:   "admin only",
			answer: newFakeAPI(t, problem(403, "admin_required", "this needs an admin key: the service's --admin-key (GENESIS_ADMIN_KEY) or a key of an admin tenant")),
			args:   []string{"tenant", "ls"},
			msg:    "needs an admin key",
			hint:   "hint: pass the admin key with --api-key",
		},
		{
			name:   "runtime missing",
			answer: newFakeAPI(t, problem(409, "runtime_unavailable", `runtime "runsc" is not available on this host (healthy: runc)`)),
			args:   []string{"sandbox", "create", "--profile", "tool-basic", "--runtime", "runsc"},
			msg:    `runtime "runsc" is not available`,
			hint:   "hint: `genesis capabilities` shows the runtimes",
		},
		{
			name:   "full workspace",
			answer: newFakeAPI(t, problem(413, "no_space", `write "/workspace/big": no space left on device`)),
			args:   []string{"exec", "sb-1", "--", "true"},
			msg:    `genesis: write "/workspace/big": no space left on device (no_space`,
			hint:   "--disk-mb",
		},
		{
			name:   "paused sandbox",
			answer: newFakeAPI(t, problem(409, "sandbox_paused", "sandbox sb-1 is paused; resume it")),
			args:   []string{"exec", "sb-1", "--", "true"},
			msg:    "genesis: sandbox sb-1 is paused; resume it (sandbox_paused",
			hint:   "hint: `genesis sandbox resume SANDBOX` thaws it",
		},
		{
			name:   "hibernated sandbox",
			answer: newFakeAPI(t, problem(409, "sandbox_hibernated", "sandbox sb-1 is hibernated; resume it")),
			args:   []string{"sandbox", "pause", "sb-1"},
			msg:    "is hibernated",
			hint:   "hint: `genesis sandbox resume SANDBOX` wakes it",
		},
		{
			name:   "no memory checkpoint",
			answer: newFakeAPI(t, problem(501, "memory_checkpoint_unsupported", "sandbox sb-1 runs under runc, which keeps files only; ask with memory: false")),
			args:   []string{"sandbox", "snapshot", "sb-1", "--memory"},
			msg:    "keeps files only",
			hint:   "--memory=false",
		},
		{
			name: "service not running",
			url:  closed,
			args: []string{"sandbox", "ls"},
			msg:  "genesis: cannot reach the Genesis service at " + closed + ": connection refused",
			hint: "hint: is it running (`make run`, or `sandbox-service serve`)? If it listens elsewhere, set GENESIS_URL or pass --url",
			// The failed request is not the person's business.
			notInError: "dial tcp",
		},
		{
			name:   "not the service",
			answer: newFakeAPI(t, problem(404, "route_not_found", "no route GET /v1/sandboxes")),
			args:   []string{"sandbox", "ls"},
			msg:    "no route",
			hint:   "as new as this CLI (`genesis version`)? Set GENESIS_URL or pass --url",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			url := c.url
			if url == "" {
				url = c.answer.URL
			}
			r := cli(t, url, "", c.env, c.args...)
			if r.code != 1 {
				t.Errorf("exit %d, want 1", r.code)
			}
			lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
			if len(lines) != 2 || !strings.Contains(lines[0], c.msg) || !strings.HasPrefix(lines[1], "hint: ") || !strings.Contains(lines[1], c.hint) {
				t.Fatalf("stderr %q; want a line with %q, then a hint with %q", r.stderr, c.msg, c.hint)
			}
			if route.MatchString(lines[1]) {
				t.Errorf("the hint %q names an HTTP route", lines[1])
			}
			if c.name != "not the service" && route.MatchString(lines[0]) {
				t.Errorf("the message %q names an HTTP route", lines[0])
			}
			if c.notInError != "" && strings.Contains(r.stderr, c.notInError) {
				t.Errorf("stderr %q contains %q", r.stderr, c.notInError)
			}
		})
	}
}

// TestNoHintWhereNothingHelps: an error without a hint is one line.
func TestNoHintWhereNothingHelps(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, problem(409, "conflict", "sandbox sb-1 is busy"))
	r := cli(t, api.URL, "", nil, "sandbox", "rm", "sb-1")
	if strings.Contains(r.stderr, "hint:") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("stderr %q; want one line without a hint", r.stderr)
	}
}

// TestNoHintTheDetailSays: a problem whose detail already names the
// command of its code's hint is one line (the service's words for a
// paused or hibernated sandbox name genesis sandbox resume).
func TestNoHintTheDetailSays(t *testing.T) {
	t.Parallel()
	for code, state := range map[string]string{"sandbox_paused": "paused", "sandbox_hibernated": "hibernated"} {
		api := newFakeAPI(t, problem(409, code, "sandbox sb-1 is "+state+"; resume it: genesis sandbox resume sb-1 (POST /v1/sandboxes/sb-1/resume)"))
		r := cli(t, api.URL, "", nil, "exec", "sb-1", "--", "true")
		if r.code != 1 || strings.Contains(r.stderr, "hint:") || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "genesis sandbox resume sb-1") {
			t.Errorf("%s: exit %d stderr %q; want 1 and one line naming genesis sandbox resume sb-1", code, r.code, r.stderr)
		}
	}
}

// TestBadServiceURL: a malformed GENESIS_URL is a usage error that says
// which variable and flag to set.
func TestBadServiceURL(t *testing.T) {
	t.Parallel()
	r := cli(t, "127.0.0.1:8080", "", nil, "sandbox", "ls")
	if r.code != 2 || !strings.Contains(r.stderr, "set GENESIS_URL or pass --url") {
		t.Errorf("exit %d stderr %q; want 2 and a pointer to GENESIS_URL / --url", r.code, r.stderr)
	}
}
