package agentproto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Paths for background jobs. {id} is the service's job id.
const (
	PathJobs      = "/v1/jobs"             // POST: start (JobStartRequest → JobInfo); GET: list ([]JobInfo)
	PathJob       = "/v1/jobs/{id}"        // GET: JobInfo; DELETE: forget a finished job
	PathJobStream = "/v1/jobs/{id}/stream" // GET ?stdout=N&stderr=M: frames from those offsets, live, then an exit frame
	PathJobCancel = "/v1/jobs/{id}/cancel" // POST JobCancelRequest: kill the whole process tree
	// PathJobRelease: POST ?stdout=N&stderr=M: the caller has stored the
	// output before those offsets, so the agent may drop it (answer 204). A
	// stream asked from below a dropped offset then fails with 409
	// (failed_precondition).
	PathJobRelease = "/v1/jobs/{id}/release"
	// PathJobStdin: PUT, body streamed into the stdin of a job started
	// with StdinStream, in order, as it arrives. One writer at a time (a
	// second gets 409 CodeStdinBusy); sequential PUTs append. The agent
	// answers 200 as soon as it took the writer and, once the body ended
	// or the stream broke, sends a JobStdinResult. The end of a PUT does
	// not close the job's stdin.
	PathJobStdin = "/v1/jobs/{id}/stdin"
	// PathJobStdinClose: POST closes the job's stdin, so the process reads
	// EOF (204). Idempotent; a finished job's stdin is closed already.
	PathJobStdinClose = "/v1/jobs/{id}/stdin/close"
	StreamStdoutQ     = "stdout" // query parameter: stdout offset to resume from
	StreamStderrQ     = "stderr" // query parameter: stderr offset to resume from
	ContentTypeRaw    = "application/x-genesis-frames"
)

// Problem codes of the job stdin routes (all 409).
const (
	CodeStdinNotStreamed = "stdin_not_streamed" // the job was not started with stdin_stream
	CodeJobNotRunning    = "job_not_running"    // the job has ended
	CodeStdinClosed      = "stdin_closed"       // closed by PathJobStdinClose, or the process closed it
	CodeStdinBusy        = "stdin_busy"         // another PUT is streaming into it
)

// JobStdinResult ends the answer of PUT PathJobStdin: the bytes written
// into the job's stdin, and the problem that ended the stream early, if
// any (Error.Code CodeJobNotRunning or CodeStdinClosed).
type JobStdinResult struct {
	Written int64  `json:"written"`
	Error   *Error `json:"error,omitempty"`
}

// JobStartRequest starts a background job. The job runs detached from the
// HTTP request that started it: a dropped connection neither kills it nor
// loses its output (the agent keeps up to MaxOutputBytes per stream until
// the job is forgotten).
//
// With Follow set, the answer (201) is the job's stream from its start, as
// GET …/stream with both offsets 0 would give it, and the JobInfo of the
// started job travels in the HeaderJobInfo header: one request both starts
// and follows the job.
type JobStartRequest struct {
	ExecRequest
	Follow bool `json:"follow,omitempty"`
}

// HeaderJobInfo carries the JSON JobInfo of a job started with Follow.
const HeaderJobInfo = "Genesis-Job-Info"

// JobInfo describes a job the agent knows.
type JobInfo struct {
	JobID           string      `json:"job_id"`
	PID             int         `json:"pid"`
	Running         bool        `json:"running"`
	StdoutBytes     int64       `json:"stdout_bytes"` // produced so far, kept or not
	StderrBytes     int64       `json:"stderr_bytes"`
	StdoutTruncated bool        `json:"stdout_truncated"`
	StderrTruncated bool        `json:"stderr_truncated"`
	StdinOpen       bool        `json:"stdin_open,omitempty"` // a streamed stdin that is not closed yet
	Exit            *ExitResult `json:"exit,omitempty"`       // set once the job has ended
}

// ExitResult is how a background job ended (the payload of an exit frame).
type ExitResult struct {
	ExitCode        int    `json:"exit_code"`
	ExitReason      string `json:"exit_reason"` // exited | timeout | signal | oom | canceled
	Signal          string `json:"signal,omitempty"`
	StdoutBytes     int64  `json:"stdout_bytes"`
	StderrBytes     int64  `json:"stderr_bytes"`
	StdoutTruncated bool   `json:"stdout_truncated"`
	StderrTruncated bool   `json:"stderr_truncated"`
	DurationMS      int64  `json:"duration_ms"`
}

// JobCancelRequest cancels a job: SIGTERM to every process of the job's tree
// (including descendants that left its process group or session), then
// SIGKILL after GraceMS.
type JobCancelRequest struct {
	GraceMS int64 `json:"grace_ms"`
}

// FrameType says what a frame carries.
type FrameType byte

// Frame types.
const (
	FrameStdout    FrameType = 1 // payload: output bytes at Offset of stdout
	FrameStderr    FrameType = 2 // payload: output bytes at Offset of stderr
	FrameTruncated FrameType = 3 // Offset: kept bytes of the stream in payload[0] (1 stdout, 2 stderr); nothing more is kept
	FrameExit      FrameType = 4 // payload: ExitResult JSON; always the last frame
)

// FrameHeaderSize is the size of an encoded frame header:
// type (1) · reserved (3) · payload length (4, big endian) · offset (8, big endian).
const FrameHeaderSize = 16

// MaxFramePayload bounds one frame's payload.
const MaxFramePayload = 1 << 20

// Frame is one unit of a job's output stream.
type Frame struct {
	Type    FrameType
	Offset  int64 // stream offset of Payload[0] (stdout/stderr frames)
	Payload []byte
}

// ErrBadFrame reports a malformed frame.
var ErrBadFrame = errors.New("malformed frame")

// AppendFrame appends the encoding of f to b.
func AppendFrame(b []byte, f Frame) []byte {
	return append(AppendFrameHeader(b, f), f.Payload...)
}

// AppendFrameHeader appends the header of f (which gives the length of
// its payload) to b, for a writer that sends the payload from where it
// lies.
func AppendFrameHeader(b []byte, f Frame) []byte {
	var h [FrameHeaderSize]byte
	h[0] = byte(f.Type)
	binary.BigEndian.PutUint32(h[4:8], uint32(len(f.Payload)))
	binary.BigEndian.PutUint64(h[8:16], uint64(f.Offset))
	return append(b, h[:]...)
}

// ReadFrame reads one frame from r. It returns io.EOF at a clean end and
// io.ErrUnexpectedEOF (or ErrBadFrame) for a torn or invalid frame.
func ReadFrame(r io.Reader, buf []byte) (Frame, []byte, error) {
	var h [FrameHeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return Frame{}, buf, err
	}
	t, n, off, err := ParseFrameHeader(h[:])
	if err != nil {
		return Frame{}, buf, err
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, buf, err
	}
	return Frame{Type: t, Offset: off, Payload: buf}, buf, nil
}

// ParseFrameHeader decodes and checks a frame header (FrameHeaderSize bytes):
// the frame's type, payload length and stream offset.
func ParseFrameHeader(h []byte) (FrameType, uint32, int64, error) {
	if len(h) < FrameHeaderSize {
		return 0, 0, 0, fmt.Errorf("%w: short header", ErrBadFrame)
	}
	t := FrameType(h[0])
	n := binary.BigEndian.Uint32(h[4:8])
	off := int64(binary.BigEndian.Uint64(h[8:16]))
	if t < FrameStdout || t > FrameExit || n > MaxFramePayload || off < 0 || h[1]|h[2]|h[3] != 0 {
		return 0, 0, 0, fmt.Errorf("%w: type %d, length %d, offset %d", ErrBadFrame, t, n, off)
	}
	return t, n, off, nil
}
