package opensandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/compat/shared"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/jobs"
	"genesis.dev/sandbox/internal/sandbox"
)

// workspace is where relative paths and commands without a cwd land.
const workspace = "/workspace"

// sandboxPath makes a path of the SDK absolute (relative paths are under
// the workspace); the file gateway applies the profile's path policy.
func sandboxPath(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", errdefs.Invalid("path contains NUL")
	}
	if p == "" {
		return "", errdefs.Invalid("path is required")
	}
	if !path.IsAbs(p) {
		p = workspace + "/" + p
	}
	return path.Clean(p), nil
}

// ping serves GET /ping: the execd is up while the sandbox runs.
func (a *Adapter) ping(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte("pong"))
}

// event is one record of a command's stream: bare JSON, one per line.
type event struct {
	Type          string          `json:"type"`
	Text          string          `json:"text,omitempty"`
	Timestamp     int64           `json:"timestamp"`
	ExecutionTime *int64          `json:"execution_time,omitempty"`
	Error         *executionError `json:"error,omitempty"`
}

type executionError struct {
	Name      string   `json:"ename"`
	Value     string   `json:"evalue"`
	Traceback []string `json:"traceback"`
}

// runCommand serves POST /command {command, cwd, background, timeout (ms),
// envs}: a background job of `bash -c command`, streamed as the SDK's
// events — init (the command's id), stdout and stderr a line each without
// its terminator, then execution_complete (exit 0) or error {ename,
// evalue: the exit code, traceback}. A background command's stream ends
// after init; GET /command/status/{id} and /command/{id}/logs follow it.
func (a *Adapter) runCommand(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Command    string            `json:"command"`
		Cwd        string            `json:"cwd"`
		Background bool              `json:"background"`
		Timeout    int64             `json:"timeout"`
		Envs       map[string]string `json:"envs"`
		UID        *int              `json:"uid"`
	}
	if err := shared.DecodeBody(r, &body); err != nil {
		a.writeError(w, r, err)
		return
	}
	if strings.TrimSpace(body.Command) == "" {
		a.writeError(w, r, errdefs.Invalid("command is required"))
		return
	}
	if body.UID != nil {
		a.writeError(w, r, errdefs.WithCode("not_supported", fmt.Errorf("uid and gid are not supported: commands run as the sandbox's user: %w", errdefs.ErrNotImplemented)))
		return
	}
	cwd := workspace
	if body.Cwd != "" {
		p, err := sandboxPath(body.Cwd)
		if err != nil {
			a.writeError(w, r, err)
			return
		}
		cwd = p
	}
	timeout := a.maxJob
	if body.Timeout > 0 {
		timeout = min(timeout, body.Timeout)
	}
	ctx := r.Context()
	tenant := tenantOf(ctx)
	start := time.Now()
	job, err := a.jobs.StartJob(ctx, jobs.ExecInput{Tenant: tenant, SandboxID: sandboxOf(ctx),
		Command: []string{"/bin/bash", "-c", body.Command}, Cwd: cwd, Env: body.Envs, TimeoutMS: timeout})
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(ev event) error {
		if ev.Timestamp == 0 {
			ev.Timestamp = time.Now().UnixMilli()
		}
		b, _ := json.Marshal(ev)
		if _, err := w.Write(append(b, '\n', '\n')); err != nil {
			return err
		}
		return rc.Flush()
	}
	if send(event{Type: "init", Text: job.ID}) != nil || body.Background {
		return
	}
	a.streamLines(ctx, tenant, job.ID, start, send)
}

// streamLines sends a job's output a line at a time from its durable log,
// then its end. A line split over records is joined; the last line of a
// stream without a terminator is sent at the end.
func (a *Adapter) streamLines(ctx context.Context, tenant, jobID string, start time.Time, send func(event) error) {
	_, log, err := a.jobs.JobLog(ctx, tenant, jobID)
	if err != nil {
		_ = send(event{Type: "error", Error: &executionError{Name: "ExecutionError", Value: "-1", Traceback: []string{err.Error()}}})
		return
	}
	var pending [2][]byte // stdout, stderr: a line begun, not ended
	names := [2]string{"stdout", "stderr"}
	flush := func(i int, all bool) error {
		for {
			n := bytes.IndexByte(pending[i], '\n')
			if n < 0 {
				break
			}
			if err := send(event{Type: names[i], Text: string(bytes.TrimSuffix(pending[i][:n], []byte("\r")))}); err != nil {
				return err
			}
			pending[i] = pending[i][n+1:]
		}
		if all && len(pending[i]) > 0 {
			if err := send(event{Type: names[i], Text: string(pending[i])}); err != nil {
				return err
			}
			pending[i] = nil
		}
		return nil
	}
	_ = log.Read(ctx, 0, true, func(e jobs.LogEvent) error {
		switch e.Type {
		case jobs.FrameStdout, jobs.FrameStderr:
			i := 0
			if e.Type == jobs.FrameStderr {
				i = 1
			}
			pending[i] = append(pending[i], e.Payload...)
			return flush(i, false)
		case jobs.FrameExit:
			if err := flush(0, true); err != nil {
				return err
			}
			if err := flush(1, true); err != nil {
				return err
			}
			x, err := e.Exit()
			if err != nil {
				return err
			}
			ms := time.Since(start).Milliseconds()
			if x.ExitCode == 0 && x.ExitReason == string(sandbox.ExitExited) {
				return send(event{Type: "execution_complete", ExecutionTime: &ms})
			}
			why := fmt.Sprintf("the command ended: %s, exit code %d", x.ExitReason, x.ExitCode)
			if x.Signal != "" {
				why += ", signal " + x.Signal
			}
			return send(event{Type: "error", ExecutionTime: &ms, Error: &executionError{Name: "CommandExecError", Value: strconv.Itoa(x.ExitCode), Traceback: []string{why}}})
		}
		return nil
	})
}

// commandOf finds a command (job) of the token's sandbox.
func (a *Adapter) commandOf(r *http.Request, id string) (*sandbox.Job, error) {
	j, err := a.jobs.GetJob(r.Context(), tenantOf(r.Context()), id)
	if err == nil && j.SandboxID != sandboxOf(r.Context()) {
		err = errdefs.ErrNotFound
	}
	if err != nil && errdefs.Is(err, errdefs.ErrNotFound) {
		return nil, errdefs.WithCode("command_not_found", fmt.Errorf("no command %q in this sandbox: %w", id, errdefs.ErrNotFound))
	}
	return j, err
}

// interrupt serves DELETE /command?id=: the command's process tree ended.
func (a *Adapter) interrupt(w http.ResponseWriter, r *http.Request) {
	j, err := a.commandOf(r, r.URL.Query().Get("id"))
	if err == nil {
		_, err = a.jobs.CancelJob(r.Context(), tenantOf(r.Context()), j.ID)
	}
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// commandGet serves GET /command/status/{id} and /command/{id}/logs.
func (a *Adapter) commandGet(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.PathValue("a") == "status":
		a.commandStatus(w, r, r.PathValue("b"))
	case r.PathValue("b") == "logs":
		a.commandLogs(w, r, r.PathValue("a"))
	default:
		a.writeError(w, r, errdefs.WithCode("not_found", fmt.Errorf("no route %s: %w", r.URL.Path, errdefs.ErrNotFound)))
	}
}

// commandStatus serves GET /command/status/{id}.
func (a *Adapter) commandStatus(w http.ResponseWriter, r *http.Request, id string) {
	j, err := a.commandOf(r, id)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	out := map[string]any{"id": j.ID, "running": !j.State.Final()}
	if len(j.Command) == 3 {
		out["content"] = j.Command[2]
	}
	if j.ExitCode != nil {
		out["exit_code"] = *j.ExitCode
	}
	if j.Error != "" {
		out["error"] = j.Error
	} else if j.State.Final() && j.ExitReason != sandbox.ExitExited {
		out["error"] = string(j.ExitReason)
	}
	if j.StartedAt != nil {
		out["started_at"] = j.StartedAt.UTC().Format(time.RFC3339Nano)
	}
	if j.FinishedAt != nil {
		out["finished_at"] = j.FinishedAt.UTC().Format(time.RFC3339Nano)
	}
	writeJSON(w, http.StatusOK, out)
}

// commandLogs serves GET /command/{cid}/logs?cursor=: the output written
// after cursor (stdout and stderr as they came), and in
// EXECD-COMMANDS-TAIL-CURSOR the cursor to ask from next.
func (a *Adapter) commandLogs(w http.ResponseWriter, r *http.Request, id string) {
	j, err := a.commandOf(r, id)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	var cursor int64
	if v := r.URL.Query().Get("cursor"); v != "" {
		if cursor, err = strconv.ParseInt(v, 10, 64); err != nil || cursor < 0 {
			a.writeError(w, r, errdefs.Invalid("cursor %q is not a cursor this service gave", v))
			return
		}
	}
	_, log, err := a.jobs.JobLog(r.Context(), tenantOf(r.Context()), j.ID)
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	if ok, _ := log.ValidCursor(cursor); !ok {
		a.writeError(w, r, errdefs.Invalid("cursor %d is not a cursor this service gave", cursor))
		return
	}
	var out bytes.Buffer
	next := cursor
	err = log.Read(r.Context(), cursor, false, func(e jobs.LogEvent) error {
		if e.Type == jobs.FrameStdout || e.Type == jobs.FrameStderr {
			out.Write(e.Payload)
		}
		next = e.Cursor
		return nil
	})
	if err != nil {
		a.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("EXECD-COMMANDS-TAIL-CURSOR", strconv.FormatInt(next, 10))
	_, _ = w.Write(out.Bytes())
}
