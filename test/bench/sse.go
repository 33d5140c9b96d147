package bench

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// SSEEvent is one dispatched Server-Sent Event. Data is only valid until
// the next call of Next.
type SSEEvent struct {
	ID   string // the last event ID as of this event ("" if none was sent)
	Name string // the event type; "message" when the event set none
	Data []byte // the data lines joined by "\n"
}

// SSEReader reads a text/event-stream as the WHATWG HTML specification
// says, except that a lone CR does not end a line (LF and CRLF do).
type SSEReader struct {
	r      *bufio.Reader
	long   []byte // a line longer than r's buffer, gathered here
	data   []byte
	lastID string
}

// NewSSEReader returns a reader of the events in r, reading it through a
// buffer of size bytes (lines may be longer).
func NewSSEReader(r io.Reader, size int) *SSEReader {
	return &SSEReader{r: bufio.NewReaderSize(r, size)}
}

// Next returns the next event. At the end of the stream it returns io.EOF,
// discarding an event that no blank line ended (as the specification
// says); a stream cut inside a line gives io.ErrUnexpectedEOF.
func (s *SSEReader) Next() (SSEEvent, error) {
	s.data = s.data[:0]
	var name string
	hasData := false
	for {
		line, err := s.line()
		if err != nil {
			return SSEEvent{}, err
		}
		if len(line) == 0 {
			if !hasData {
				name = "" // nothing to dispatch; the id, if any, stays
				continue
			}
			if name == "" {
				name = "message"
			}
			return SSEEvent{ID: s.lastID, Name: name, Data: bytes.TrimSuffix(s.data, []byte{'\n'})}, nil
		}
		if line[0] == ':' {
			continue // comment (keepalive)
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			value = bytes.TrimPrefix(value, []byte{' '})
		}
		switch string(field) {
		case "event":
			name = string(value)
		case "data":
			s.data = append(append(s.data, value...), '\n')
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				s.lastID = string(value)
			}
		}
	}
}

// line returns the next line without its end of line.
func (s *SSEReader) line() ([]byte, error) {
	b, err := s.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		s.long = append(s.long[:0], b...)
		for errors.Is(err, bufio.ErrBufferFull) {
			b, err = s.r.ReadSlice('\n')
			s.long = append(s.long, b...)
		}
		b = s.long
	}
	switch {
	case err == nil:
		return trimEOL(b), nil
	case errors.Is(err, io.EOF) && len(b) > 0:
		return nil, io.ErrUnexpectedEOF
	}
	return nil, err
}

func trimEOL(b []byte) []byte {
	b = b[:len(b)-1]
	return bytes.TrimSuffix(b, []byte{'\r'})
}

var (
	outputPrefix = []byte(`{"offset":`)
	outputData   = []byte(`,"data":"`)
	outputSuffix = []byte(`"}`)
)

// DecodeOutput decodes the data of a stdout or stderr event into the
// stream offset and the bytes, which it stores in dst's array if it is
// large enough. The data is either the text form "<offset>\n<bytes>" (of
// ?encoding=text) or a JSON object {"offset": N, "data": "<base64>"}. The
// service's own JSON (those two keys in that order, no escapes) takes a
// fast path that decodes the base64 in place; other JSON goes through
// encoding/json.
func DecodeOutput(data, dst []byte) (int64, []byte, error) {
	if len(data) > 0 && data[0] != '{' {
		head, text, ok := bytes.Cut(data, []byte{'\n'})
		off, err := strconv.ParseInt(string(head), 10, 64)
		if !ok || err != nil || off < 0 || head[0] < '0' || head[0] > '9' {
			return 0, nil, fmt.Errorf("output event %.80q: want \"<offset>\\n<text>\" or a JSON object", data)
		}
		return off, append(dst[:0], text...), nil
	}
	if rest, ok := bytes.CutPrefix(data, outputPrefix); ok && bytes.HasSuffix(rest, outputSuffix) {
		if i := bytes.Index(rest, outputData); i > 0 && i+len(outputData) <= len(rest)-len(outputSuffix) {
			off, err := strconv.ParseInt(string(rest[:i]), 10, 64)
			b64 := rest[i+len(outputData) : len(rest)-len(outputSuffix)]
			if err == nil && off >= 0 {
				n := base64.StdEncoding.DecodedLen(len(b64))
				dst = slices.Grow(dst[:0], n)[:n]
				if m, err := base64.StdEncoding.Decode(dst, b64); err == nil {
					return off, dst[:m], nil
				}
			}
		}
	}
	var v struct {
		Offset *int64  `json:"offset"`
		Data   *[]byte `json:"data"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return 0, nil, fmt.Errorf("output event: %w", err)
	}
	if v.Offset == nil || *v.Offset < 0 || v.Data == nil {
		return 0, nil, fmt.Errorf("output event %.80q: want a non-negative offset and data", data)
	}
	return *v.Offset, append(dst[:0], *v.Data...), nil
}
