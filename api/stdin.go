package api

// StdinWritten is the answer of PUT /v1/jobs/{id}/stdin.
type StdinWritten struct {
	Bytes int64 `json:"bytes"`
}

// JobExit is how an attached job ended.
type JobExit struct {
	ExitCode   int    `json:"exit_code"`
	ExitReason string `json:"exit_reason"`
	Signal     string `json:"signal,omitempty"`
}

// AttachMessage is every text message of the attach WebSocket
// (GET /v1/jobs/{id}/attach): the service's hello, exit and error, and the
// caller's close_stdin. Binary messages carry the output, a first byte
// AttachStdout or AttachStderr before the bytes, and the caller's stdin.
type AttachMessage struct {
	Type       string `json:"type"`
	Job        string `json:"job,omitempty"`
	Stdin      *bool  `json:"stdin,omitempty"`
	ExitCode   *int   `json:"exit_code,omitempty"`
	ExitReason string `json:"exit_reason,omitempty"`
	Signal     string `json:"signal,omitempty"`
	Cursor     *int64 `json:"cursor,omitempty"`
	Error      string `json:"error,omitempty"`
}

// Stream tags of the attach WebSocket's binary messages from the service.
const (
	AttachStdout byte = 1
	AttachStderr byte = 2
)
