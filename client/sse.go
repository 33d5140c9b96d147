package client

import (
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
	// until the next call of next: the reader reuses its memory, unless
	// the event is detachable and the caller detaches it.
	Data []byte
	// detachable: Data is the reader's gathering buffer, which
	// sseReader.detach hands to the caller.
	detachable bool
}

// sseReader parses a text/event-stream body as the WHATWG HTML standard
// specifies: lines end in CRLF, LF or CR; a leading BOM is skipped; lines
// starting with ':' are comments; data fields accumulate with '\n'
// between them; an empty line dispatches; an event cut off by the end of
// the stream is dropped.
//
// It is the hot path of log streaming (an event carries up to a MiB of
// output), so it copies each byte as few times as it can. It reads into a
// buffer of its own that grows to hold a long line whole, so every line is
// parsed where it lies; the data of an event that is one line (the JSON
// form of output) is handed out in place, without a copy; and bytes are
// moved to the buffer's start only when it is full, and only those of the
// line being read. The data of an event of several lines (the text form
// of output) is gathered in a buffer the caller may keep (detach).
type sseReader struct {
	src    io.Reader
	buf    []byte
	r, w   int   // buf[r:w] is read and not yet parsed
	err    error // the source's error, reported once buf[r:w] holds no whole line
	pinned bool  // the event being read holds a slice of buf: buf must not move

	data    []byte // the data of the event being read, when it has several lines
	hint    int    // the size of the last event of several lines
	skipLF  bool   // the last line ended with CR: a following LF belongs to it
	started bool   // the BOM check is done

	lastID string        // the last event id buffer
	retry  time.Duration // the last valid retry field, 0 if none
	max    int           // bound on a line and on an event's data
}

// sseReadBuffer is the initial size of an sseReader's read buffer: large
// enough that reads of a fast stream are few. It grows (to about twice the
// longest line) when lines do not fit.
const sseReadBuffer = 256 << 10

func newSSEReader(r io.Reader) *sseReader { return newSSEReaderSize(r, sseReadBuffer) }

// newSSEReaderSize is newSSEReader with a read buffer of size bytes (at
// least 16) to start with.
func newSSEReaderSize(r io.Reader, size int) *sseReader {
	return &sseReader{src: r, buf: make([]byte, max(size, 16)), max: maxEventBytes}
}

// next returns the next event. It returns io.EOF at a clean end of the
// stream (an unfinished event is dropped) and the reader's error otherwise.
func (p *sseReader) next() (sseEvent, error) {
	var event string
	var single []byte // the only data line so far, in buf
	lines, size := 0, 0
	p.pinned = false // the last event's data is no longer valid
	for {
		line, err := p.readLine()
		if err != nil {
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if lines == 0 {
				event = ""
				continue
			}
			ev := sseEvent{ID: p.lastID, Event: event, Data: single}
			if lines > 1 {
				ev.Data, ev.detachable = p.data[:len(p.data)-1], true
				p.hint = len(p.data)
			}
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
			if size+len(value)+1 > p.max {
				return sseEvent{}, errEventTooLarge
			}
			size += len(value) + 1
			lines++
			switch lines {
			case 1:
				// Kept where it lies: the event may have no other line.
				single, p.pinned = value, true
				continue
			case 2:
				if p.data == nil {
					p.data = make([]byte, 0, min(p.hint+p.hint/8+4096, p.max+1))
				}
				p.data = append(p.data[:0], single...)
				p.data = append(p.data, '\n')
				single, p.pinned = nil, false
			}
			p.data = append(p.data, value...)
			p.data = append(p.data, '\n')
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

// detach gives the data of the event next returned last to the caller,
// who may keep it, when the event was detachable (several data lines):
// the reader gathers the next such event elsewhere.
func (p *sseReader) detach() { p.data = nil }

// readLine returns the next line without its terminator, as a slice of the
// read buffer valid until the buffer moves (see fill). A line cut off by
// the end of the stream is not returned: the error is.
func (p *sseReader) readLine() ([]byte, error) {
	scanned := 0 // buf[r:r+scanned] holds no line end
	for {
		if !p.started {
			if p.w-p.r < 3 && p.err == nil {
				p.fill()
				continue
			}
			p.started = true
			if p.w-p.r >= 3 && string(p.buf[p.r:p.r+3]) == "\xEF\xBB\xBF" {
				p.r += 3
			}
		}
		if p.skipLF && p.r < p.w {
			p.skipLF = false
			if p.buf[p.r] == '\n' {
				p.r++
			}
		}
		if !p.skipLF && p.r < p.w {
			if i := lineEnd(p.buf[p.r+scanned : p.w]); i >= 0 {
				end := p.r + scanned + i
				line := p.buf[p.r:end:end]
				p.skipLF = p.buf[end] == '\r'
				p.r = end + 1
				return line, nil
			}
			scanned = p.w - p.r
			if scanned > p.max {
				return nil, errEventTooLarge
			}
		}
		if p.err != nil {
			return nil, p.err
		}
		p.fill() // scanned stays right: it counts from r, which moves with the line
	}
}

// maxRead bounds one read of the source.
const maxRead = 128 << 10

// maxEmptyReads bounds the reads in a row that return nothing and no error.
const maxEmptyReads = 100

// fill reads more of the source after buf[r:w]. A full buffer first makes
// room: the line being read moves to the buffer's start, or, when it
// fills more than half the buffer or the event holds a slice of it
// (pinned), to a new buffer (twice as large when more than half full, up
// to what the longest allowed line needs).
func (p *sseReader) fill() {
	if p.w == len(p.buf) {
		n := p.w - p.r
		size := len(p.buf)
		if n > size/2 {
			// Bounded: a line (n) never exceeds max (see readLine).
			size = min(2*size, p.max+maxRead)
		}
		if p.r > 0 && !p.pinned && size == len(p.buf) {
			copy(p.buf, p.buf[p.r:p.w])
		} else {
			nb := make([]byte, size)
			copy(nb, p.buf[p.r:p.w])
			p.buf, p.pinned = nb, false
		}
		p.r, p.w = 0, n
	}
	// Reads of at most maxRead, so a line's end is looked for in bytes
	// still in the CPU's cache.
	end := min(len(p.buf), p.w+maxRead)
	for range maxEmptyReads {
		n, err := p.src.Read(p.buf[p.w:end])
		p.w += n
		if err != nil {
			p.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	p.err = io.ErrNoProgress
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
