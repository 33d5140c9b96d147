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
	Data  string
}

// sseReader parses a text/event-stream body as the WHATWG HTML standard
// specifies: lines end in CRLF, LF or CR; a leading BOM is skipped; lines
// starting with ':' are comments; data fields accumulate with '\n'
// between them; an empty line dispatches; an event cut off by the end of
// the stream is dropped.
type sseReader struct {
	r       *bufio.Reader
	line    []byte
	skipLF  bool // the last line ended with CR: a following LF belongs to it
	started bool // the BOM check is done

	lastID string        // the last event id buffer
	retry  time.Duration // the last valid retry field, 0 if none
	max    int           // bound on a line and on an event's data
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 64<<10), max: maxEventBytes}
}

// next returns the next event. It returns io.EOF at a clean end of the
// stream (an unfinished event is dropped) and the reader's error otherwise.
func (p *sseReader) next() (sseEvent, error) {
	var (
		event string
		data  []byte
	)
	for {
		line, err := p.readLine()
		if err != nil {
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if len(data) == 0 {
				event = ""
				continue
			}
			ev := sseEvent{ID: p.lastID, Event: event, Data: string(data[:len(data)-1])}
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
			if len(data)+len(value)+1 > p.max {
				return sseEvent{}, errEventTooLarge
			}
			data = append(data, value...)
			data = append(data, '\n')
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

// readLine returns the next line without its terminator. The slice is
// valid until the next call. A line cut off by the end of the stream is
// not returned: the error is.
func (p *sseReader) readLine() ([]byte, error) {
	p.line = p.line[:0]
	for {
		if p.r.Buffered() == 0 {
			if _, err := p.r.Peek(1); err != nil {
				return nil, err
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
		i := bytes.IndexAny(buf, "\r\n")
		if i < 0 {
			if len(p.line)+len(buf) > p.max {
				return nil, errEventTooLarge
			}
			p.line = append(p.line, buf...)
			_, _ = p.r.Discard(len(buf))
			continue
		}
		if len(p.line)+i > p.max {
			return nil, errEventTooLarge
		}
		p.line = append(p.line, buf[:i]...)
		p.skipLF = buf[i] == '\r'
		_, _ = p.r.Discard(i + 1)
		return p.line, nil
	}
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
	d := e.Data
	if len(d) > 80 {
		d = d[:80] + "…"
	}
	return fmt.Sprintf("event %q id %q data %q", e.Event, e.ID, d)
}
