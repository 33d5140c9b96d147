package jobs

import (
	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/joblog"
)

// The job log as the jobs API hands it out (JobLog, StartedJobLog): the
// durable, cursor-resumable log of one job. The types are joblog's, whose
// records are the agent's frames; they are named here so that the API
// layer depends on jobs alone.
type (
	// Log is a job's durable log.
	Log = joblog.Log
	// LogEvent is one record of a log and the cursor after it.
	LogEvent = joblog.Event
)

// The kinds of log records.
const (
	FrameStdout    = agentproto.FrameStdout
	FrameStderr    = agentproto.FrameStderr
	FrameTruncated = agentproto.FrameTruncated
	FrameExit      = agentproto.FrameExit
)
