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

// TerminalMessage is every text message of the terminal WebSocket (GET
// /v1/sandboxes/{id}/terminal); binary messages are the terminal's bytes
// both ways. The caller sends {"type":"resize","cols":N,"rows":N} (the
// writer only) and {"type":"takeover"}; the service sends
// {"type":"hello","terminal":"<id>","writer":bool} first,
// {"type":"writer","writer":bool} when the role changes and
// {"type":"exit","code":N,"reason":"exited|signal","signal":"SIG…"} last.
type TerminalMessage struct {
	Type     string `json:"type"`
	Terminal string `json:"terminal,omitempty"`
	Writer   *bool  `json:"writer,omitempty"`
	Cols     int    `json:"cols,omitempty"`
	Rows     int    `json:"rows,omitempty"`
	Code     *int   `json:"code,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Signal   string `json:"signal,omitempty"`
}
