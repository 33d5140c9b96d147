package main

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// pausedJSON is sandboxJSON paused a minute ago.
var pausedJSON = strings.Replace(sandboxJSON, `"state":"ready"`,
	`"state":"paused","suspension":{"resume_state":"ready","memory":false,"since":"2026-03-01T11:59:00Z"}`, 1)

// hibernatedJSON is sandboxJSON hibernated with its memory.
var hibernatedJSON = strings.Replace(sandboxJSON, `"state":"ready"`,
	`"state":"hibernated","suspension":{"resume_state":"ready","memory":true,"since":"2026-03-01T11:58:00Z"}`, 1)

const snapshotJSON = `{"id":"snap_1","name":"base","sandbox_id":"sb-1","state":"ready","profile":"tool-basic","runtime":"runsc",
"risk_level":"high","resources":{"cpu":0.5},"memory":true,"size_bytes":3670016,"created_at":"2026-03-01T11:50:00Z",
"expires_at":"2026-03-08T11:50:00Z"}`

// restoredJSON is sandbox id made from a snapshot, with its memory and a
// copy of a session and a code context.
func restoredJSON(id string, memory bool) string {
	m := "false"
	if memory {
		m = "true"
	}
	return strings.Replace(sandboxJSON, `"id":"sb-1"`, `"id":"`+id+`","memory_restored":`+m+
		`,"sessions_from_snapshot":{"ses_a":"ses_`+id+`","ctx_b":"ctx_`+id+`"}`, 1)
}

// TestSandboxStateCommands: pause, resume, hibernate, rollback and
// snapshot send their request and say in one sentence (or the id) what
// happened.
func TestSandboxStateCommands(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name             string
		args             []string
		answer           string
		status           int
		method, path     string
		body             string // "" for none
		out              string // a regexp of stdout
		stderr           string // a regexp of stderr, or "" for none
		notOut, notInErr string
	}{
		{
			name: "pause", args: []string{"sandbox", "pause", "sb-1"}, answer: pausedJSON,
			method: "POST", path: "/v1/sandboxes/sb-1/pause",
			out: "^Sandbox sb-1 is paused: its processes are frozen and its memory kept; `genesis sandbox resume sb-1` thaws it.\n$",
		},
		{
			name: "resume of a paused one", args: []string{"sandbox", "resume", "sb-1"}, answer: sandboxJSON,
			method: "POST", path: "/v1/sandboxes/sb-1/resume",
			out: "^Sandbox sb-1 is ready again.\n$",
		},
		{
			name: "resume wakes with memory", args: []string{"sandbox", "resume", "sb-1"}, answer: restoredJSON("sb-1", true),
			method: "POST", path: "/v1/sandboxes/sb-1/resume",
			out: "^Sandbox sb-1 is ready again, woken with its processes and memory.\n$",
		},
		{
			name: "resume wakes with files only", args: []string{"sandbox", "resume", "sb-1"}, answer: restoredJSON("sb-1", false),
			method: "POST", path: "/v1/sandboxes/sb-1/resume",
			out: `^Sandbox sb-1 is ready again, woken with its files only \(its processes started afresh\).` + "\n$",
		},
		{
			name: "hibernate", args: []string{"sandbox", "hibernate", "sb-1"}, answer: hibernatedJSON,
			method: "POST", path: "/v1/sandboxes/sb-1/hibernate",
			out: "^Sandbox sb-1 is hibernated: its container is gone and its files, processes and memory are on disk; `genesis sandbox resume sb-1` \\(or the next call that needs it\\) wakes it.\n$",
		},
		{
			name: "hibernate under runc", args: []string{"sandbox", "hibernate", "sb-1"}, answer: strings.Replace(hibernatedJSON, `"memory":true`, `"memory":false`, 1),
			method: "POST", path: "/v1/sandboxes/sb-1/hibernate",
			out: "container is gone and its files are on disk",
		},
		{
			name: "rollback", args: []string{"sandbox", "rollback", "sb-1", "snap_1"}, answer: restoredJSON("sb-1", true),
			method: "POST", path: "/v1/sandboxes/sb-1/rollback", body: `{"snapshot_id":"snap_1"}`,
			out: "^Sandbox sb-1 is back at snapshot snap_1, with its processes and memory.\n$",
		},
		{
			name: "snapshot", args: []string{"sandbox", "snapshot", "sb-1", "--name", "base"}, answer: snapshotJSON, status: 201,
			method: "POST", path: "/v1/sandboxes/sb-1/snapshots", body: `{"name":"base"}`,
			out: "^snap_1\n$", stderr: `^genesis: snapshot of sandbox sb-1: files, processes and memory, 3\.5 MiB` + "\n$",
		},
		{
			name: "snapshot of files only", args: []string{"sandbox", "snapshot", "sb-1", "--memory=false"},
			answer: strings.Replace(snapshotJSON, `"memory":true`, `"memory":false`, 1), status: 201,
			method: "POST", path: "/v1/sandboxes/sb-1/snapshots", body: `{"memory":false}`,
			out: "^snap_1\n$", stderr: "files only",
		},
		{
			name: "snapshot asking for memory", args: []string{"sandbox", "snapshot", "sb-1", "--memory"}, answer: snapshotJSON, status: 201,
			method: "POST", path: "/v1/sandboxes/sb-1/snapshots", body: `{"memory":true}`,
			out: "^snap_1\n$", stderr: "memory",
		},
		{
			name: "snapshot as JSON", args: []string{"-o", "json", "sandbox", "snapshot", "sb-1"}, answer: snapshotJSON, status: 201,
			method: "POST", path: "/v1/sandboxes/sb-1/snapshots", body: `{}`,
			out: `"size_bytes": 3670016`, notOut: "^snap_1\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status := tc.status
			if status == 0 {
				status = 200
			}
			api := newFakeAPI(t, reply(status, tc.answer))
			r := cli(t, api.URL, "", nil, tc.args...)
			if r.code != 0 {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			req := api.only(t)
			if req.Method != tc.method || req.Path != tc.path {
				t.Errorf("request %s %s, want %s %s", req.Method, req.Path, tc.method, tc.path)
			}
			if tc.body != "" {
				jsonEqual(t, req.Body, tc.body)
			}
			if !regexp.MustCompile(tc.out).MatchString(r.stdout) {
				t.Errorf("stdout %q, want it to match %q", r.stdout, tc.out)
			}
			if tc.notOut != "" && regexp.MustCompile(tc.notOut).MatchString(r.stdout) {
				t.Errorf("stdout %q matches %q", r.stdout, tc.notOut)
			}
			if tc.stderr == "" && r.stderr != "" || tc.stderr != "" && !regexp.MustCompile(tc.stderr).MatchString(r.stderr) {
				t.Errorf("stderr %q, want %q", r.stderr, tc.stderr)
			}
		})
	}
}

// TestSandboxFork: the ids of the copies on stdout, one per line; for each
// what came back, and each failed copy, on stderr; exit 1 only when no
// copy was made.
func TestSandboxFork(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, reply(201, `{"sandboxes":[`+restoredJSON("sb-2", true)+`,`+restoredJSON("sb-3", false)+`],
		"errors":[{"code":"capacity_exhausted","detail":"no room for another sandbox"}]}`))
	r := cli(t, api.URL, "", nil, "sandbox", "fork", "sb-1", "--count", "3", "--ttl", "90s", "--meta", "run=7")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	req := api.only(t)
	if req.Method != "POST" || req.Path != "/v1/sandboxes/sb-1/fork" {
		t.Errorf("request %s %s", req.Method, req.Path)
	}
	jsonEqual(t, req.Body, `{"count":3,"ttl_seconds":90,"metadata":{"run":"7"}}`)
	if r.stdout != "sb-2\nsb-3\n" {
		t.Errorf("stdout %q, want the two ids", r.stdout)
	}
	for _, want := range []string{
		"genesis: sb-2: with its processes and memory; sessions ctx_b→ctx_sb-2, ses_a→ses_sb-2\n",
		"genesis: sb-3: with its files only (its processes started afresh); sessions ctx_b→ctx_sb-3, ses_a→ses_sb-3\n",
		"genesis: a copy failed: no room for another sandbox (capacity_exhausted)\n",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}

	// No copy made: the service's problem, exit 1.
	none := newFakeAPI(t, problem(503, "capacity_exhausted", "no room for another sandbox"))
	r = cli(t, none.URL, "", nil, "sandbox", "fork", "sb-1", "--count", "2")
	if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "no room for another sandbox (capacity_exhausted") {
		t.Errorf("a fork that made nothing: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	for _, args := range [][]string{
		{"sandbox", "fork", "sb-1"},
		{"sandbox", "fork", "sb-1", "--count", "0"},
		{"sandbox", "fork", "sb-1", "--count", "2", "--meta", "novalue"},
		{"sandbox", "fork", "sb-1", "--count", "2", "--ttl", "-1s"},
		{"sandbox", "fork", "--count", "2"},
	} {
		if r := cli(t, none.URL, "", nil, args...); r.code != 2 {
			t.Errorf("%q: exit %d, want a usage error (stderr %q)", args, r.code, r.stderr)
		}
	}
}

// TestSandboxCreateFromSnapshot: --snapshot needs no profile; the new id
// on stdout, what came back on stderr.
func TestSandboxCreateFromSnapshot(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, reply(201, restoredJSON("sb-9", true)))
	r := cli(t, api.URL, "", nil, "sandbox", "create", "--snapshot", "snap_1", "--ttl", "1m")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	jsonEqual(t, api.only(t).Body, `{"profile":"","snapshot_id":"snap_1","ttl_seconds":60}`)
	if r.stdout != "sb-9\n" || r.stderr != "genesis: sb-9: with its processes and memory; sessions ctx_b→ctx_sb-9, ses_a→ses_sb-9\n" {
		t.Errorf("stdout %q, stderr %q", r.stdout, r.stderr)
	}
}

// TestSandboxGetSuspended: the detail view of a paused or hibernated
// sandbox says since when and what it keeps.
func TestSandboxGetSuspended(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ answer, want string }{
		{pausedJSON, `(?m)^Suspended: +since 2026-03-01T11:59:00Z \(1m ago\); frozen, its memory kept$`},
		{hibernatedJSON, `(?m)^Suspended: +since 2026-03-01T11:58:00Z \(2m ago\); wakes with its processes and memory$`},
		{strings.Replace(hibernatedJSON, `"memory":true`, `"memory":false,"operation":"waking"`, 1), `(?m)^Suspended: +.*; wakes with its files only; waking now$`},
		{sandboxJSON, ""}, // no Suspended line
	} {
		api := newFakeAPI(t, reply(200, tc.answer))
		r := cli(t, api.URL, "", nil, "sandbox", "get", "sb-1")
		if tc.want == "" && strings.Contains(r.stdout, "Suspended") {
			t.Errorf("a running sandbox's view has a Suspended line:\n%s", r.stdout)
		}
		if r.code != 0 || tc.want != "" && !regexp.MustCompile(tc.want).MatchString(r.stdout) {
			t.Errorf("exit %d; output does not match %q:\n%s", r.code, tc.want, r.stdout)
		}
	}
}

// TestSnapshotCommands: ls (all, or one sandbox's), get and rm.
func TestSnapshotCommands(t *testing.T) {
	t.Parallel()
	files := strings.NewReplacer(`"id":"snap_1","name":"base"`, `"id":"snap_2"`, `"memory":true`, `"memory":false`,
		`"runtime":"runsc"`, `"runtime":"runc"`, `"size_bytes":3670016`, `"size_bytes":512`,
		`"expires_at":"2026-03-08T11:50:00Z"`, `"expires_at":"2026-03-01T11:55:00Z"`).Replace(snapshotJSON)
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		switch r.Method + " " + r.URL.Path {
		case "GET /v1/snapshots", "GET /v1/sandboxes/sb-1/snapshots":
			reply(200, `{"items":[`+snapshotJSON+`,`+files+`]}`)(w, r, b)
		case "GET /v1/snapshots/snap_1":
			reply(200, snapshotJSON)(w, r, b)
		case "DELETE /v1/snapshots/snap_1", "DELETE /v1/snapshots/snap_gone":
			w.WriteHeader(http.StatusNoContent)
		default:
			problem(404, "snapshot_not_found", "no snapshot "+r.URL.Path)(w, r, b)
		}
	})
	r := cli(t, api.URL, "", nil, "snapshot", "ls")
	want := "" +
		"ID      NAME  SANDBOX  STATE  RUNTIME  MEMORY  SIZE     AGE  EXPIRES\n" +
		"snap_1  base  sb-1     ready  runsc    yes     3.5 MiB  10m  in 6d\n" +
		"snap_2  -     sb-1     ready  runc     no      512 B    10m  expired\n"
	if r.code != 0 || r.stdout != want {
		t.Errorf("ls: exit %d, stderr %q, table\n%s\nwant\n%s", r.code, r.stderr, r.stdout, want)
	}
	if r := cli(t, api.URL, "", nil, "snapshot", "ls", "--sandbox", "sb-1"); r.code != 0 || api.requests()[1].Path != "/v1/sandboxes/sb-1/snapshots" {
		t.Errorf("ls --sandbox: exit %d, request %+v", r.code, api.requests()[1])
	}

	r = cli(t, api.URL, "", nil, "snapshot", "get", "snap_1")
	for _, line := range []string{
		`^ID: +snap_1$`, `^Name: +base$`, `^Sandbox: +sb-1$`, `^Runtime: +runsc$`, `^Holds: +files, processes and memory$`,
		`^Size: +3\.5 MiB$`, `^Expires: +2026-03-08T11:50:00Z \(in 6d\)$`,
	} {
		if !regexp.MustCompile("(?m)" + line).MatchString(r.stdout) {
			t.Errorf("get: output lacks %s:\n%s", line, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "Error") || strings.Contains(r.stdout, "Parent") {
		t.Errorf("get printed an empty field:\n%s", r.stdout)
	}

	r = cli(t, api.URL, "", nil, "snapshot", "rm", "snap_1", "snap_nope", "snap_gone")
	if r.code != 1 || r.stdout != "snap_1\nsnap_gone\n" || !strings.Contains(r.stderr, "genesis: snap_nope: no snapshot") {
		t.Errorf("rm: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if r := cli(t, api.URL, "", nil, "snapshot", "rm"); r.code != 2 {
		t.Errorf("rm without ids: exit %d", r.code)
	}
}
