package client

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// maxEventBytes bounds the data of one Server-Sent Event. The service sends
// output in chunks far below this; the cap only stops a broken or hostile
// server from exhausting memory.
const maxEventBytes = 64 << 20

// errEventTooLarge is returned by sseReader.next for an event over
// maxEventBytes.
var errEventTooLarge = errors.New("server-sent event too large")

// sseEvent is one dispatched Server-Sent Event.
type sseEvent struct {
	// ID is the stream's last event id when the event was dispatched (the
	// value of the most recent id field, in this or an earlier event).
	ID    string
	Event string // "message" when the event named none
	// Data is the event's data lines joined with LF. It is only valid
	// until the next call of next: the reader reuses its memory.
	Data []byte
}

// sseReader parses a text/event-stream body as the WHATWG HTML standard
// specifies: lines end in CRLF, LF or CR; a leading BOM is skipped; lines
// starting with ':' are comments; data fields accumulate with '\n'
// between them; an empty line dispatches; an event cut off by the end of
// the stream is dropped.
//
// It is the hot path of log streaming (an event carries up to a MiB of
// output), so it copies each byte as few times as it can: a line wholly in
// the read buffer is parsed where it lies, and the data of an event that
// is one long line (the JSON form of output) becomes the event's data
// without a second copy.
type sseReader struct {
	r       *bufio.Reader
	line    []byte // a line longer than what the read buffer held, gathered
	data    []byte // the data of the event being read
	skipLF  bool   // the last line ended with CR: a following LF belongs to it
	started bool   // the BOM check is done

	lastID string        // the last event id buffer
	retry  time.Duration // the last valid retry field, 0 if none
	max    int           // bound on a line and on an event's data
}

// sseReadBuffer is the size of an sseReader's read buffer: large enough
// that reads of a fast stream are few, and that most lines are parsed in
// place.
const sseReadBuffer = 256 << 10

func newSSEReader(r io.Reader) *sseReader { return newSSEReaderSize(r, sseReadBuffer) }

// newSSEReaderSize is newSSEReader with a read buffer of size bytes (at
// least 16).
func newSSEReaderSize(r io.Reader, size int) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, size), max: maxEventBytes}
}

// next returns the next event. It returns io.EOF at a clean end of the
// stream (an unfinished event is dropped) and the reader's error otherwise.
func (p *sseReader) next() (sseEvent, error) {
	var event string
	hasData := false
	p.data = p.data[:0]
	for {
		line, owned, err := p.readLine()
		if err != nil {
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if !hasData {
				event = ""
				continue
			}
			ev := sseEvent{ID: p.lastID, Event: event, Data: p.data[:len(p.data)-1]}
			if ev.Event == "" {
				ev.Event = "message"
			}
			return ev, nil
		}
		if line[0] == ':' {
			continue // comment, e.g. a keepalive
		}
		name, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			name, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(name) {
		case "event":
			event = string(value)
		case "data":
			if len(p.data)+len(value)+1 > p.max {
				return sseEvent{}, errEventTooLarge
			}
			if owned && len(p.data) == 0 {
				// The first data line was gathered in p.line: it becomes
				// the data, and the data's old memory gathers lines next.
				p.line, p.data = p.data[:0], append(value, '\n')
			} else {
				p.data = append(p.data, value...)
				p.data = append(p.data, '\n')
			}
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				p.lastID = string(value)
			}
		case "retry":
			if n, err := strconv.ParseUint(string(value), 10, 31); err == nil && isDigits(value) {
				p.retry = time.Duration(n) * time.Millisecond
			}
		}
		// Other field names are ignored.
	}
}

// readLine returns the next line without its terminator: a slice of the
// read buffer when the line lies in it whole, else (owned) p.line, where it
// was gathered. The slice is valid until the next call. A line cut off by
// the end of the stream is not returned: the error is.
func (p *sseReader) readLine() (line []byte, owned bool, err error) {
	gathering := false
	for {
		if p.r.Buffered() == 0 {
			if _, err := p.r.Peek(1); err != nil {
				return nil, false, err
			}
		}
		buf, _ := p.r.Peek(p.r.Buffered())
		if !p.started {
			p.started = true
			if b, _ := p.r.Peek(3); string(b) == "\xEF\xBB\xBF" {
				_, _ = p.r.Discard(3)
			}
			continue
		}
		if p.skipLF {
			p.skipLF = false
			if buf[0] == '\n' {
				_, _ = p.r.Discard(1)
				continue
			}
		}
		i := lineEnd(buf)
		if i < 0 {
			if !gathering {
				gathering, p.line = true, p.line[:0]
			}
			if len(p.line)+len(buf) > p.max {
				return nil, false, errEventTooLarge
			}
			p.line = append(p.line, buf...)
			_, _ = p.r.Discard(len(buf))
			continue
		}
		p.skipLF = buf[i] == '\r'
		if !gathering {
			// The slice stays valid: Discard does not move the buffer.
			line = buf[:i:i]
			_, _ = p.r.Discard(i + 1)
			return line, false, nil
		}
		if len(p.line)+i > p.max {
			return nil, false, errEventTooLarge
		}
		p.line = append(p.line, buf[:i]...)
		_, _ = p.r.Discard(i + 1)
		return p.line, true, nil
	}
}

// lineEnd returns the index of the first CR or LF in b, or -1.
func lineEnd(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return bytes.IndexByte(b, '\r')
	}
	if j := bytes.IndexByte(b[:i], '\r'); j >= 0 {
		return j
	}
	return i
}

func isDigits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// String renders the event for error messages.
func (e sseEvent) String() string {
	d := string(e.Data[:min(len(e.Data), 80)])
	if len(e.Data) > 80 {
		d += "…"
	}
	return fmt.Sprintf("event %q id %q data %q", e.Event, e.ID, d)
}
