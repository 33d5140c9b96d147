package e2e

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/sandbox"
)

// testJobLogsBadInput sends wrong requests to the job endpoints: unknown
// jobs, malformed cursors, cursors that are not event boundaries, cursors at
// and beyond the end, and another tenant's job (otherKey is its API key).
func testJobLogsBadInput(t *testing.T, e *env, svc *service, otherKey string) {
	eachRuntime(t, e, func(t *testing.T, rt string) {
		raw, other := svc.raw(), svc.rawWithKey(otherKey)
		sb := e.createSandbox(t, client.CreateSandboxRequest{Profile: "tool-basic", Runtime: rt})
		job := raw.startJob(t, sb.ID, execBody{Script: "printf abc; printf def >&2"})
		l := &jobLog{}
		raw.followLogs(t, job.ID, l, time.Minute)
		if string(l.stdout) != "abc" || string(l.stderr) != "def" || len(l.marks) < 3 {
			t.Fatalf("job log: stdout %q stderr %q, %d events; want abc, def and an exit event", l.stdout, l.stderr, len(l.marks))
		}
		end := l.cursor

		// logs answers with problem+json before any event; status checks it.
		logsStatus := func(what string, a *rawAPI, jobID string, req logRequest, status int, code string) {
			t.Helper()
			ctx, cancel := contextWithTimeout(callTimeout)
			defer cancel()
			resp, err := a.openLogs(ctx, jobID, req)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
			if resp.StatusCode != status || (code != "" && !containsCode(b, code)) {
				t.Errorf("%s: %d %s; want %d %s", what, resp.StatusCode, b, status, code)
			}
		}
		unknown := sandbox.NewID("job")
		logsStatus("logs of an unknown job", raw, unknown, logRequest{}, http.StatusNotFound, "not_found")
		logsStatus("logs of a malformed job id", raw, "nope", logRequest{}, http.StatusNotFound, "not_found")
		for _, c := range []string{"abc", "-1", "1.5", "0x10"} {
			logsStatus("?cursor="+c, raw, job.ID, logRequest{cursor: c, query: true}, http.StatusBadRequest, "invalid_cursor")
			logsStatus("Last-Event-ID "+c, raw, job.ID, logRequest{cursor: c}, http.StatusBadRequest, "invalid_cursor")
		}
		for _, c := range []string{"3", "17"} {
			logsStatus("cursor "+c+" inside the first event", raw, job.ID, logRequest{cursor: c, query: true}, http.StatusBadRequest, "invalid_cursor")
		}
		inside := l.marks[0].cursor + 1
		logsStatus("cursor inside the second event", raw, job.ID, logRequest{cursor: itoa(inside)}, http.StatusBadRequest, "invalid_cursor")
		if status, p, err := raw.try(http.MethodGet, "/v1/jobs/"+job.ID+"/logs?follow=maybe", nil, nil); err != nil || status != http.StatusBadRequest {
			t.Errorf("?follow=maybe: %d %q (%v); want 400", status, p.Code, err)
		}
		if status, p, err := raw.try(http.MethodGet, "/v1/jobs/"+job.ID+"/logs?encoding=utf-7", nil, nil); err != nil || status != http.StatusBadRequest || p.Code != "invalid_encoding" {
			t.Errorf("?encoding=utf-7: %d %q (%v); want 400 invalid_encoding", status, p.Code, err)
		}

		// At or beyond the end of a finished job's log: 200, and the stream
		// just ends, with follow=false and also when following (a client
		// that resumes after the exit event, as EventSource does, must not
		// be held open forever).
		for _, c := range []int64{end, end + 1000, 1 << 40} {
			for _, noFollow := range []bool{true, false} {
				ctx, cancel := contextWithTimeout(10 * time.Second)
				rest := &jobLog{cursor: c}
				err := raw.readLogs(ctx, job.ID, rest, logRequest{cursor: itoa(c), query: c != end, noFollow: noFollow})
				if err != nil || len(rest.marks) != 0 || ctx.Err() != nil {
					t.Errorf("cursor %d (end %d), follow=%v: err %v, %d events, ctx %v; want 200 ending at once with no events", c, end, !noFollow, err, len(rest.marks), ctx.Err())
				}
				cancel()
			}
		}

		// Another tenant sees none of it.
		logsStatus("another tenant's job logs", other, job.ID, logRequest{}, http.StatusNotFound, "not_found")
		status, p, err := other.try(http.MethodGet, "/v1/jobs/"+job.ID, nil, nil)
		if err != nil || status != http.StatusNotFound {
			t.Errorf("another tenant's GET job: %d %q (%v); want 404", status, p.Code, err)
		}
		running := raw.startJob(t, sb.ID, execBody{Command: []string{"sleep", "60"}})
		for _, c := range []struct {
			what string
			a    *rawAPI
			id   string
		}{{"another tenant's job", other, running.ID}, {"an unknown job", raw, unknown}, {"a malformed job id", raw, "nope"}} {
			status, p, err := c.a.try(http.MethodPost, "/v1/jobs/"+c.id+"/cancel", nil, nil)
			if err != nil || status != http.StatusNotFound || p.Code != "not_found" {
				t.Errorf("cancel %s: %d %q (%v); want 404 not_found", c.what, status, p.Code, err)
			}
		}
		if j := raw.getJob(t, running.ID); j.State != "running" {
			t.Errorf("the job another tenant tried to cancel is %s, want running", j.State)
		}
		if status, p := raw.call(t, http.MethodPost, "/v1/jobs/"+running.ID+"/cancel", nil, nil); status != http.StatusAccepted {
			t.Errorf("cancel by its own tenant: %d %s; want 202", status, p.Code)
		}
		if j := raw.waitJob(t, running.ID, time.Minute); j.State != "canceled" {
			t.Errorf("the job canceled by its tenant is %s, want canceled", j.State)
		}
	})
}

func containsCode(problem []byte, code string) bool {
	return strings.Contains(string(problem), `"code":"`+code+`"`)
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
