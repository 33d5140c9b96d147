package agentproto

// Terminals: processes on a pseudo-terminal that keep running independently
// of any connection. {id} is the terminal id chosen by the caller.
//
// POST /v1/terminals/{id}/attach is a full-duplex HTTP/2 stream: the request
// body is raw input written to the terminal as it arrives (its end only means
// "no more input from this client"); the response body (ContentTypeRaw) is a
// sequence of frames as for jobs:
//
//   - FrameStdout: terminal output; Offset is the position of Payload[0] in
//     everything the terminal ever produced. The agent keeps only the last
//     TerminalBufferBytes, and a client that falls behind by more than that
//     skips ahead: a frame whose Offset is beyond the end of the previous one
//     says how much was lost.
//   - FrameExit, last: ExitResult JSON (exit_code, exit_reason exited or
//     signal, signal, duration_ms, stdout_bytes = total output).
//
// The stream starts at the query's offset=N (clamped to what is kept), else
// with the kept output when replay=1, else at the current end (live output
// only). It ends after the exit frame once the process has exited and its
// output is drained, or when the client goes away.
const (
	PathTerminals      = "/v1/terminals"             // POST TerminalStartRequest → TerminalInfo (201); GET → []TerminalInfo
	PathTerminal       = "/v1/terminals/{id}"        // GET → TerminalInfo; DELETE: kill the process group, forget the terminal
	PathTerminalAttach = "/v1/terminals/{id}/attach" // POST ?replay=1|offset=N: full-duplex stream (see above)
	PathTerminalResize = "/v1/terminals/{id}/resize" // POST TerminalResize → TerminalInfo
	AttachReplayQ      = "replay"                    // query: 1 to start with the kept output
	AttachOffsetQ      = "offset"                    // query: output offset to resume from
)

// TerminalBufferBytes is how much recent output a terminal keeps for replay.
const TerminalBufferBytes = 64 << 10

// Default and maximum terminal sizes.
const (
	DefaultTerminalCols = 80
	DefaultTerminalRows = 24
	MaxTerminalSize     = 65535 // cols and rows are 16-bit in the kernel
)

// TerminalStartRequest starts a process on a new pseudo-terminal.
type TerminalStartRequest struct {
	// ID names the terminal; it must be new: 1-128 characters of
	// [A-Za-z0-9._-].
	ID string `json:"id"`
	// Command is the argv; empty: the user's shell (/bin/bash if present,
	// else /bin/sh).
	Command []string `json:"command,omitempty"`
	// Cols and Rows are the window size; 0: 80x24.
	Cols int `json:"cols,omitempty"`
	Rows int `json:"rows,omitempty"`
	// Env is added to the agent's base environment; TERM defaults to
	// xterm-256color.
	Env map[string]string `json:"env,omitempty"`
	// Cwd is the working directory (relative: to the default workdir).
	Cwd string `json:"cwd,omitempty"`
}

// TerminalResize changes a terminal's window size; the foreground process
// group gets SIGWINCH.
type TerminalResize struct {
	Cols int `json:"cols"`
	Rows int `json:"rows"`
}

// TerminalInfo describes a terminal the agent knows.
type TerminalInfo struct {
	ID      string   `json:"id"`
	Command []string `json:"command"`
	PID     int      `json:"pid"`
	Cols    int      `json:"cols"`
	Rows    int      `json:"rows"`
	Running bool     `json:"running"`
	// OutputBytes is the total output so far; KeptFrom the offset of the
	// oldest byte still kept for replay.
	OutputBytes int64 `json:"output_bytes"`
	KeptFrom    int64 `json:"kept_from"`
	// Exit is set once the process has exited.
	Exit *ExitResult `json:"exit,omitempty"`
}
