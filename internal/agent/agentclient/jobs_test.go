package agentclient

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

func TestJobCallsAndErrorClasses(t *testing.T) {
	t.Parallel()
	sock, _ := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == agentproto.PathJobs:
			var req agentproto.JobStartRequest
			json.NewDecoder(r.Body).Decode(&req)
			switch req.JobID {
			case "dup":
				writeJSON(w, 409, agentproto.Error{Code: "conflict", Message: "exists"})
			case "":
				writeJSON(w, 400, agentproto.Error{Code: "invalid_argument", Message: "job_id is required"})
			default:
				writeJSON(w, 201, agentproto.JobInfo{JobID: req.JobID, PID: 42, Running: true})
			}
		case r.Method == http.MethodGet && r.URL.Path == agentproto.PathJobs:
			writeJSON(w, 200, []agentproto.JobInfo{{JobID: "a"}, {JobID: "b"}})
		case r.URL.Path == "/v1/jobs/known" && r.Method == http.MethodGet:
			writeJSON(w, 200, agentproto.JobInfo{JobID: "known", Exit: &agentproto.ExitResult{ExitReason: "exited"}})
		case r.URL.Path == "/v1/jobs/known" && r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case r.URL.Path == "/v1/jobs/running" && r.Method == http.MethodDelete:
			writeJSON(w, 409, agentproto.Error{Code: "conflict", Message: "still running"})
		case r.URL.Path == "/v1/jobs/known/cancel":
			var req agentproto.JobCancelRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.GraceMS != 1500 {
				writeJSON(w, 400, agentproto.Error{Message: "want grace 1500"})
				return
			}
			writeJSON(w, 202, agentproto.JobInfo{JobID: "known"})
		default:
			writeJSON(w, 404, agentproto.Error{Code: "not_found", Message: "no job"})
		}
	})
	c := Dial(sock)
	defer c.Close()
	ctx := context.Background()
	info, err := c.StartJob(ctx, agentproto.JobStartRequest{ExecRequest: agentproto.ExecRequest{JobID: "j", Script: "x"}})
	if err != nil || info.PID != 42 || !info.Running {
		t.Errorf("StartJob = %+v, %v", info, err)
	}
	if _, err := c.StartJob(ctx, agentproto.JobStartRequest{ExecRequest: agentproto.ExecRequest{JobID: "dup"}}); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := c.StartJob(ctx, agentproto.JobStartRequest{}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("invalid: %v", err)
	}
	if list, err := c.ListJobs(ctx); err != nil || len(list) != 2 {
		t.Errorf("ListJobs = %+v, %v", list, err)
	}
	if in, err := c.JobInfo(ctx, "known"); err != nil || in.Exit == nil {
		t.Errorf("JobInfo = %+v, %v", in, err)
	}
	if _, err := c.JobInfo(ctx, "nope"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("unknown: %v", err)
	}
	if err := c.CancelJob(ctx, "known", 1500*time.Millisecond); err != nil {
		t.Errorf("CancelJob: %v", err)
	}
	if err := c.CancelJob(ctx, "known", -time.Second); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("negative grace: %v", err)
	}
	if err := c.ForgetJob(ctx, "known"); err != nil {
		t.Errorf("ForgetJob: %v", err)
	}
	if err := c.ForgetJob(ctx, "running"); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("forget running: %v", err)
	}
	if err := c.ForgetJob(ctx, "a/b"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("escaped id: %v", err)
	}
}

func writeFrames(w http.ResponseWriter, frames ...agentproto.Frame) {
	w.Header().Set("Content-Type", agentproto.ContentTypeRaw)
	var b []byte
	for _, f := range frames {
		b = agentproto.AppendFrame(b, f)
	}
	w.Write(b)
}

func TestStreamJobEndings(t *testing.T) {
	t.Parallel()
	exit, _ := json.Marshal(agentproto.ExitResult{ExitReason: "exited"})
	sock, _ := fakeAgent(t, func(w http.ResponseWriter, r *http.Request) {
		out := agentproto.Frame{Type: agentproto.FrameStdout, Offset: 7, Payload: []byte("hello")}
		switch strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/jobs/"), "/stream") {
		case "complete":
			if r.URL.Query().Get("stdout") != "7" || r.URL.Query().Get("stderr") != "3" {
				writeJSON(w, 400, agentproto.Error{Message: "offsets " + r.URL.RawQuery})
				return
			}
			writeFrames(w, out, agentproto.Frame{Type: agentproto.FrameExit, Payload: exit},
				agentproto.Frame{Type: agentproto.FrameStdout, Payload: []byte("after exit")})
		case "torn":
			writeFrames(w, out)
		case "bad":
			writeFrames(w, out)
			w.Write(make([]byte, agentproto.FrameHeaderSize)) // type 0
		case "text":
			w.Write([]byte("hello"))
		case "hang":
			writeFrames(w, out)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			writeJSON(w, 404, agentproto.Error{Code: "not_found", Message: "no job"})
		}
	})
	c := Dial(sock)
	defer c.Close()
	ctx := context.Background()
	var got []agentproto.Frame
	collect := func(f agentproto.Frame) error {
		f.Payload = append([]byte(nil), f.Payload...) // the payload is reused after fn returns
		got = append(got, f)
		return nil
	}
	if err := c.StreamJob(ctx, "complete", 7, 3, collect); err != nil {
		t.Fatalf("complete: %v", err)
	}
	if len(got) != 2 || string(got[0].Payload) != "hello" || got[0].Offset != 7 || got[1].Type != agentproto.FrameExit {
		t.Errorf("frames %+v: want output and exit, nothing after", got)
	}
	for id, want := range map[string]error{
		"torn":    errdefs.ErrUnavailable,
		"bad":     errdefs.ErrInternal,
		"text":    errdefs.ErrInternal,
		"missing": errdefs.ErrNotFound,
	} {
		if err := c.StreamJob(ctx, id, 0, 0, func(agentproto.Frame) error { return nil }); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", id, err, want)
		}
	}
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := c.StreamJob(tctx, "hang", 0, 0, func(agentproto.Frame) error { return nil }); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errdefs.ErrDeadlineExceeded) {
		t.Errorf("hang: %v, want a deadline error", err)
	}
	stop := errors.New("stop")
	if err := c.StreamJob(ctx, "complete", 7, 3, func(agentproto.Frame) error { return stop }); err != stop {
		t.Errorf("fn error: %v", err)
	}
}
