package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/trace"
)

type tracePage struct {
	Events []trace.Event `json:"events"`
	Next   int64         `json:"next"`
}

// sseIDs reads the ids of the trace events of an SSE body.
func sseIDs(t *testing.T, body string) []int64 {
	t.Helper()
	var ids []int64
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "id: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("sse id %q", v)
			}
			ids = append(ids, n)
		}
	}
	return ids
}

// TestTraceHTTP posts caller events, reads them as JSON pages and as SSE
// resumed from every cursor, follows a live event, and checks bad input
// (unknown kind, system actor, non-object data, cursor beyond the end,
// another tenant) is refused and appends nothing.
func TestTraceHTTP(t *testing.T) {
	a := newAPI(t, nil)
	sb, _ := a.createHTTP(keyA, client.CreateSandboxRequest{})
	base := "/v1/sandboxes/" + sb.ID + "/trace"
	// An empty trace reads as no events.
	resp, body := a.do(req{method: "GET", path: base + "?format=json", key: keyA})
	if resp.StatusCode != 200 || len(decodeJSON[tracePage](t, body).Events) != 0 {
		t.Fatalf("empty trace: %d %s", resp.StatusCode, body)
	}
	const n = 5
	for i := 1; i <= n; i++ {
		kind := "annotation"
		if i == n {
			kind = "task.status"
		}
		resp, body := a.do(req{method: "POST", path: base + "/events", key: keyA,
			body: fmt.Sprintf(`{"kind":%q,"actor":"human:ann","data":{"i":%d}}`, kind, i)})
		if resp.StatusCode != 201 {
			t.Fatalf("post %d: %d %s", i, resp.StatusCode, body)
		}
		if e := decodeJSON[trace.Event](t, body); e.Seq != int64(i) || e.Actor != "human:ann" || string(e.Kind) != kind {
			t.Fatalf("post %d: %+v", i, e)
		}
	}
	for _, bad := range []string{`{"kind":"browser.action"}`, `{"kind":"annotation","actor":"system"}`,
		`{"kind":"annotation","data":[1]}`, `{"kind":"annotation","data":{"x":"` + strings.Repeat("x", trace.MaxDataBytes) + `"}}`,
		`{"kind":"annotation","extra":1}`} {
		resp, body := a.do(req{method: "POST", path: base + "/events", key: keyA, body: bad})
		if resp.StatusCode != 400 && resp.StatusCode != 413 {
			t.Fatalf("bad event %.60s: %d %s", bad, resp.StatusCode, body)
		}
	}
	// JSON pages of 2 walk the whole trace once.
	var seen []int64
	for after := int64(0); ; {
		resp, body := a.do(req{method: "GET", path: fmt.Sprintf("%s?format=json&after=%d&limit=2", base, after), key: keyA})
		if resp.StatusCode != 200 {
			t.Fatalf("page after %d: %d %s", after, resp.StatusCode, body)
		}
		p := decodeJSON[tracePage](t, body)
		if len(p.Events) == 0 {
			break
		}
		for _, e := range p.Events {
			seen = append(seen, e.Seq)
		}
		after = p.Next
	}
	if fmt.Sprint(seen) != "[1 2 3 4 5]" {
		t.Fatalf("pages saw %v (bad events appended or gap)", seen)
	}
	// SSE resumed from every cursor by Last-Event-ID and by ?cursor=.
	for c := 0; c <= n; c++ {
		for _, r := range []req{
			{method: "GET", path: base + "?follow=false", key: keyA, header: map[string]string{"Last-Event-ID": strconv.Itoa(c)}},
			{method: "GET", path: fmt.Sprintf("%s?follow=false&cursor=%d", base, c), key: keyA},
		} {
			resp, body := a.do(r)
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("sse from %d: %d %s", c, resp.StatusCode, body)
			}
			ids := sseIDs(t, string(body))
			if len(ids) != n-c {
				t.Fatalf("sse from %d: ids %v", c, ids)
			}
			for k, id := range ids {
				if id != int64(c+k+1) {
					t.Fatalf("sse from %d: ids %v", c, ids)
				}
			}
		}
	}
	for _, bad := range []string{"?cursor=6", "?cursor=x", "?cursor=-1", "?format=xml", "?limit=0"} {
		if resp, body := a.do(req{method: "GET", path: base + bad, key: keyA}); resp.StatusCode != 400 {
			t.Fatalf("GET %s: %d %s", bad, resp.StatusCode, body)
		}
	}
	// Another tenant sees no such sandbox.
	for _, r := range []req{{method: "GET", path: base + "?format=json", key: keyB},
		{method: "POST", path: base + "/events", key: keyB, body: `{"kind":"annotation"}`}} {
		if resp, body := a.do(r); resp.StatusCode != 404 {
			t.Fatalf("tenant b %s: %d %s", r.method, resp.StatusCode, body)
		}
	}
	// A follower sees an event appended after it caught up.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hr, _ := http.NewRequestWithContext(ctx, "GET", a.url+base+"?cursor=5", nil)
	hr.Header.Set("Authorization", "Bearer "+keyA)
	fresp, err := a.hc.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer fresp.Body.Close()
	if resp, body := a.do(req{method: "POST", path: base + "/events", key: keyA, body: `{"kind":"annotation"}`}); resp.StatusCode != 201 {
		t.Fatalf("post live: %d %s", resp.StatusCode, body)
	}
	sc := bufio.NewScanner(fresp.Body)
	for sc.Scan() {
		if sc.Text() == "id: 6" {
			return
		}
		if strings.HasPrefix(sc.Text(), "id: ") {
			t.Fatalf("follower got %q, want id 6", sc.Text())
		}
	}
	t.Fatalf("follower ended without event 6: %v", sc.Err())
}

// TestActorNames: a person's name (trace actors human:<who>, desktop
// control holders, the live view's who=) is letters, digits, spaces and
// . - _ @ : only, at most 64 characters; anything else, markup above all,
// is 400 and records nothing.
func TestActorNames(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	sb, _ := a.createHTTP(keyA, client.CreateSandboxRequest{})
	base := "/v1/sandboxes/" + sb.ID
	good := []string{"ann", "Ana Lima", "ana.lima@example.com", "ops:on-call_2", "José Ñúñez", strings.Repeat("x", 64)}
	bad := []string{"", "<img src=x onerror=alert(1)>", "<b>ann</b>", "ann&amp;", `a"b`, "a'b", "a/b", "a\nb", "a\tb",
		"a\u202eb", "a\u200bb", "a\x00b", " ann", "ann ", strings.Repeat("x", 65), "a%3Cb"}
	body := func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	for _, who := range good {
		resp, b := a.do(req{method: "POST", path: base + "/trace/events", key: keyA, body: body(map[string]any{"kind": "annotation", "actor": "human:" + who})})
		if resp.StatusCode != http.StatusCreated || decodeJSON[trace.Event](t, b).Actor != "human:"+who {
			t.Errorf("trace actor human:%s: %d %s", who, resp.StatusCode, b)
		}
	}
	for _, who := range bad {
		resp, b := a.do(req{method: "POST", path: base + "/trace/events", key: keyA, body: body(map[string]any{"kind": "annotation", "actor": "human:" + who})})
		checkProblem(t, resp, b, http.StatusBadRequest, "invalid_trace_event")
		resp, b = a.do(req{method: "POST", path: base + "/trace/pause", key: keyA, body: body(map[string]any{"actor": "human:" + who})})
		checkProblem(t, resp, b, http.StatusBadRequest, "invalid_trace_event")
		resp, b = a.do(req{method: "POST", path: base + "/control", key: keyA, body: body(map[string]any{"holder": "human:" + who})})
		checkProblem(t, resp, b, http.StatusBadRequest, "invalid_holder")
		if who == "" {
			continue // who= empty is the default viewer
		}
		resp, b = a.do(req{method: "GET", path: base + "/display/vnc?role=controller&who=" + url.QueryEscape(who), key: keyA})
		checkProblem(t, resp, b, http.StatusBadRequest, "invalid_holder")
	}
	resp, b := a.do(req{method: "GET", path: base + "/trace?format=json", key: keyA})
	if n := len(decodeJSON[tracePage](t, b).Events); resp.StatusCode != http.StatusOK || n != len(good) {
		t.Errorf("the trace holds %d events, want the %d good ones: %s", n, len(good), b)
	}
}
