package api

import (
	"encoding/json"
	"net/url"
	"time"
)

// TracePath is the path of a sandbox's operation trace.
func TracePath(id string) string { return "/v1/sandboxes/" + url.PathEscape(id) + "/trace" }

// TraceEvent is one event of a sandbox's operation trace.
type TraceEvent struct {
	// Seq is dense and monotonic from 1 within the trace: the cursor.
	Seq  int64     `json:"seq"`
	Time time.Time `json:"time"`
	// Actor is agent, api, system or human:<who>.
	Actor string          `json:"actor"`
	Kind  string          `json:"kind"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// TracePage is one JSON page of a trace.
type TracePage struct {
	Events []TraceEvent `json:"events"`
	// Next is the cursor to read on from.
	Next int64 `json:"next"`
}

// TraceEventRequest is the body of POST .../trace/events: kind annotation
// or task.status, actor api (default), agent or human:<who>.
type TraceEventRequest struct {
	Kind  string          `json:"kind"`
	Actor string          `json:"actor,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// TraceInterruptRequest is the optional body of POST
// /v1/sandboxes/{id}/trace/{pause,resume,step,abort}.
type TraceInterruptRequest struct {
	// Actor is who interrupts: api (the default) or human:<who>.
	Actor string `json:"actor,omitempty"`
}

// TraceInterruption is a sandbox's interrupt state.
type TraceInterruption struct {
	// State is running, paused or aborted.
	State string `json:"state"`
	// Steps is how many agent actions may still pass while paused.
	Steps int `json:"steps"`
	// CanceledJobs are the jobs an abort canceled.
	CanceledJobs []string `json:"canceled_jobs,omitempty"`
}

// TraceManifest is manifest.json of a trace export (GET
// /v1/sandboxes/{id}/trace/export), the archive's last file: an archive
// without it was cut short.
type TraceManifest struct {
	SandboxID  string    `json:"sandbox_id"`
	ExportedAt time.Time `json:"exported_at"`
	// Events is how many lines events.jsonl holds.
	Events int                 `json:"events"`
	Files  []TraceManifestFile `json:"files"`
	// Missing lists artifacts the events name that are no longer kept.
	Missing []string `json:"missing_artifacts,omitempty"`
}

// TraceManifestFile is one file of a trace export, as its manifest lists
// it.
type TraceManifestFile struct {
	// Path is the file's name in the archive (events.jsonl,
	// artifacts/<id>.<ext>, player.html).
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// ArtifactID is the artifact the file is, for artifacts.
	ArtifactID string `json:"artifact_id,omitempty"`
}

// ReplayRequest is the body of POST /v1/traces/{id}/replay (id: the
// sandbox whose trace is replayed).
type ReplayRequest struct {
	// TargetSandbox is a running sandbox of the source's profile that the
	// recorded agent actions are run on again.
	TargetSandbox string `json:"target_sandbox"`
	// Threshold is the fraction of pixels (0..1, default 0.02) by which a
	// step's screenshot may differ from the recorded one and still count
	// as the same.
	Threshold float64 `json:"threshold,omitempty"`
}

// ReplayStep is how one recorded agent action went when run again.
type ReplayStep struct {
	// Seq is the recorded event that started the action.
	Seq    int64  `json:"seq"`
	Kind   string `json:"kind"`
	Action string `json:"action"`
	// Status is same, differs, failed or skipped.
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// OK is whether the action succeeded now; RecordedOK then.
	OK         bool `json:"ok"`
	RecordedOK bool `json:"recorded_ok"`
	// ScreenshotDiff is the fraction of pixels that differ from the
	// recorded screenshot after the action (computer actions).
	ScreenshotDiff *float64 `json:"screenshot_diff,omitempty"`
	// ExitCode and RecordedExitCode are a job's (execs and jobs).
	ExitCode         *int `json:"exit_code,omitempty"`
	RecordedExitCode *int `json:"recorded_exit_code,omitempty"`
}

// ReplayReport answers a replay: a step per recorded agent action, in order.
type ReplayReport struct {
	Source   string       `json:"source"`
	Target   string       `json:"target"`
	Steps    []ReplayStep `json:"steps"`
	Same     int          `json:"same"`
	Differs  int          `json:"differs"`
	Failed   int          `json:"failed"`
	Skipped  int          `json:"skipped"`
	Duration int64        `json:"duration_ms"`
}
