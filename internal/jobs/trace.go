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
		return
	}
	if len(b) > trace.MaxDataBytes/2 { // a huge script: keep the event, not the text
		delete(d, "script")
		d["script_bytes"] = len(j.Script)
		b, _ = json.Marshal(d)
	}
	s.trace.Record(context.WithoutCancel(ctx), j.Tenant, j.SandboxID, trace.Event{Actor: actor, Kind: kind, Data: b})
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
