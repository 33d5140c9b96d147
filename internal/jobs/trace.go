package jobs

import (
	"context"
	"encoding/json"

	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/trace"
)

// traceJob records a job's start or end in its sandbox's trace, if the
// manager has one. Jobs a caller starts are the agent's; profile services
// and stdin-fed service jobs (not busy) are the system's.
func (s *Manager) traceJob(ctx context.Context, j *sandbox.Job, kind trace.Kind, actor string) {
	if s.trace == nil || j == nil {
		return
	}
	b, err := jobEventData(j, kind)
	if err != nil {
		return
	}
	s.trace.Record(context.WithoutCancel(ctx), j.Tenant, j.SandboxID, trace.Event{Actor: actor, Kind: kind, Data: b})
}

// jobEvent is the data of a job's trace event, its fields in the order of
// their names, as jobEventMap's keys are written.
type jobEvent struct {
	Command    []string           `json:"command,omitempty"`
	DurationMS *int64             `json:"duration_ms,omitempty"`
	Error      string             `json:"error,omitempty"`
	ExitCode   *int               `json:"exit_code,omitempty"`
	ExitReason sandbox.ExitReason `json:"exit_reason,omitempty"`
	JobID      string             `json:"job_id"`
	Mode       sandbox.JobMode    `json:"mode"`
	Script     string             `json:"script,omitempty"`
	State      *sandbox.JobState  `json:"state,omitempty"` // set for a job's end, empty or not
}

// jobEventData is the data of j's trace event of kind: jobEventMap's, but
// without building and sorting a map on every exec, except for a script
// too long to keep.
func jobEventData(j *sandbox.Job, kind trace.Kind) ([]byte, error) {
	if len(j.Script) > trace.MaxDataBytes/4 {
		return jobEventMap(j, kind)
	}
	e := jobEvent{Command: j.Command, JobID: j.ID, Mode: j.Mode, Script: j.Script}
	if kind == trace.KindJobFinished {
		e.State, e.ExitCode, e.ExitReason, e.Error = &j.State, j.ExitCode, j.ExitReason, j.Error
		if j.StartedAt != nil && j.FinishedAt != nil {
			ms := j.FinishedAt.Sub(*j.StartedAt).Milliseconds()
			e.DurationMS = &ms
		}
	}
	b, err := json.Marshal(e)
	if err != nil || len(b) > trace.MaxDataBytes/2 {
		return jobEventMap(j, kind)
	}
	return b, nil
}

// jobEventMap builds the data of j's trace event as a map, and keeps the
// event, not the text, of a huge script.
func jobEventMap(j *sandbox.Job, kind trace.Kind) ([]byte, error) {
	d := map[string]any{"job_id": j.ID, "mode": j.Mode}
	if len(j.Command) > 0 {
		d["command"] = j.Command
	}
	if j.Script != "" {
		d["script"] = j.Script
	}
	if kind == trace.KindJobFinished {
		d["state"] = j.State
		if j.ExitCode != nil {
			d["exit_code"] = *j.ExitCode
		}
		if j.ExitReason != "" {
			d["exit_reason"] = j.ExitReason
		}
		if j.Error != "" {
			d["error"] = j.Error
		}
		if j.StartedAt != nil && j.FinishedAt != nil {
			d["duration_ms"] = j.FinishedAt.Sub(*j.StartedAt).Milliseconds()
		}
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	if len(b) > trace.MaxDataBytes/2 { // a huge script: keep the event, not the text
		delete(d, "script")
		d["script_bytes"] = len(j.Script)
		b, err = json.Marshal(d)
	}
	return b, err
}

// admit asks the gate (the trace's interrupt state) whether an agent job
// may start on the sandbox now.
func (s *Manager) admit(ctx context.Context, in ExecInput, action string) error {
	if s.gate == nil {
		return nil
	}
	return s.gate.Admit(ctx, in.Tenant, in.SandboxID, action)
}

// CancelAgentJobs cancels the running background jobs a caller started on
// tenant's sandbox through this process (not its profile services or MCP
// servers: they are not the agent's), for an abort, and returns their ids. Synchronous execs end
// with their caller or timeout.
func (s *Manager) CancelAgentJobs(ctx context.Context, tenant, sandboxID string) ([]string, error) {
	list, err := s.store.ListJobs(ctx, store.JobFilter{Tenant: tenant, SandboxID: sandboxID, States: []sandbox.JobState{sandbox.JobRunning}})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, j := range list {
		if _, mine := s.agentJobs.Load(j.ID); j.Mode != sandbox.JobModeBackground || !mine {
			continue
		}
		if _, err := s.CancelJob(ctx, tenant, j.ID); err != nil {
			return ids, err
		}
		ids = append(ids, j.ID)
	}
	return ids, nil
}
