package api

import "encoding/json"

// Names of the events of a job's log stream.
const (
	// EventJob is the first event of a streamed exec; LogEvent.Job is set.
	EventJob = "job"
	// EventStdout and EventStderr carry output; LogEvent.Offset and
	// LogEvent.Data are set.
	EventStdout = "stdout"
	EventStderr = "stderr"
	// EventTruncated says a stream hit its output cap; LogEvent.Truncated
	// is set.
	EventTruncated = "truncated"
	// EventExit is the last event of a job; LogEvent.Exit is set.
	EventExit = "exit"
)

// LogEvent is one event of a job's log stream, decoded.
type LogEvent struct {
	// ID is the event's cursor: pass it as the cursor of a log request (the SDK's StreamOptions.Cursor) to get the
	// events after this one.
	ID    string `json:"id,omitempty"`
	Event string `json:"event"`
	// Offset is the position in its stream of the first byte of Data
	// (stdout and stderr events).
	Offset int64 `json:"offset,omitempty"`
	// Data holds the exact output bytes (stdout and stderr events).
	Data      []byte          `json:"data,omitempty"`
	Truncated *TruncatedEvent `json:"truncated,omitempty"`
	Exit      *ExitEvent      `json:"exit,omitempty"`
	Job       *Job            `json:"job,omitempty"`
}

// MarshalJSON writes offset and data for stdout and stderr events only
// (always, also when 0 or empty), so that JSON output says what it means.
func (e LogEvent) MarshalJSON() ([]byte, error) {
	type common struct {
		ID    string `json:"id,omitempty"`
		Event string `json:"event"`
	}
	if e.Event == EventStdout || e.Event == EventStderr {
		data := e.Data
		if data == nil {
			data = []byte{}
		}
		return json.Marshal(struct {
			common
			Offset int64  `json:"offset"`
			Data   []byte `json:"data"`
		}{common{e.ID, e.Event}, e.Offset, data})
	}
	return json.Marshal(struct {
		common
		Truncated *TruncatedEvent `json:"truncated,omitempty"`
		Exit      *ExitEvent      `json:"exit,omitempty"`
		Job       *Job            `json:"job,omitempty"`
	}{common{e.ID, e.Event}, e.Truncated, e.Exit, e.Job})
}

// Output encodings of a log stream (its encoding parameter; the SDK's
// StreamOptions.Encoding): how the service sends the bytes of stdout and
// stderr events. LogEvent.Data holds the exact bytes either way.
const (
	// EncodingText sends output that is UTF-8 without CR as the event's
	// data lines, and any other output as base64: less work at both ends
	// and, but for very short lines, fewer bytes.
	EncodingText = "text"
	// EncodingBase64 sends all output base64-encoded in JSON.
	EncodingBase64 = "base64"
)

// OutputEvent is the data of stdout and stderr events in their JSON form
// (EncodingBase64, or output that is not UTF-8 text): the stream offset of
// the first byte and the bytes, base64-encoded.
type OutputEvent struct {
	Offset int64  `json:"offset"`
	Data   string `json:"data"`
}
