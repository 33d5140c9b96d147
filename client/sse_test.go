package client

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// testEvent is an sseEvent kept after the reader moved on.
type testEvent struct {
	ID, Event, Data string
}

// readAll parses every event of an event stream.
func readAll(r io.Reader) ([]testEvent, *sseReader, error) {
	return readAllSize(r, sseReadBuffer)
}

// readAllSize is readAll through a read buffer of size bytes.
func readAllSize(r io.Reader, size int) ([]testEvent, *sseReader, error) {
	p := newSSEReaderSize(r, size)
	var out []testEvent
	for {
		ev, err := p.next()
		if errors.Is(err, io.EOF) {
			return out, p, nil
		}
		if err != nil {
			return out, p, err
		}
		out = append(out, testEvent{ID: ev.ID, Event: ev.Event, Data: string(ev.Data)})
	}
}

func TestSSEParser(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		want  []testEvent
		retry time.Duration
	}{
		{
			name: "lf",
			in:   "id: 1\nevent: stdout\ndata: {\"a\":1}\n\n",
			want: []testEvent{{ID: "1", Event: "stdout", Data: `{"a":1}`}},
		},
		{
			name: "crlf",
			in:   "id: 1\r\nevent: stdout\r\ndata: x\r\n\r\nid: 2\r\ndata: y\r\n\r\n",
			want: []testEvent{{ID: "1", Event: "stdout", Data: "x"}, {ID: "2", Event: "message", Data: "y"}},
		},
		{
			name: "cr only",
			in:   "id: 1\revent: e\rdata: x\r\rdata: y\r\r",
			want: []testEvent{{ID: "1", Event: "e", Data: "x"}, {ID: "1", Event: "message", Data: "y"}},
		},
		{
			name: "mixed line ends",
			in:   "data: a\r\ndata: b\rdata: c\n\r\n",
			want: []testEvent{{Event: "message", Data: "a\nb\nc"}},
		},
		{
			name: "multi-line data",
			in:   "data: first\ndata:second\ndata:  third\ndata\ndata:\n\n",
			want: []testEvent{{Event: "message", Data: "first\nsecond\n third\n\n"}},
		},
		{
			name: "comments and keepalives",
			in:   ": keepalive\n\n:\nevent: a\n: inside\ndata: 1\n\n: keepalive\n\n",
			want: []testEvent{{Event: "a", Data: "1"}},
		},
		{
			name: "event without data is not dispatched, its id persists",
			in:   "id: 5\nevent: ghost\n\ndata: x\n\n",
			want: []testEvent{{ID: "5", Event: "message", Data: "x"}},
		},
		{
			name: "empty id resets, id with NUL is ignored",
			in:   "id: 5\ndata: a\n\nid\ndata: b\n\nid: 7\x00\ndata: c\n\n",
			want: []testEvent{{ID: "5", Event: "message", Data: "a"}, {ID: "", Event: "message", Data: "b"}, {ID: "", Event: "message", Data: "c"}},
		},
		{
			name: "unfinished event at the end is dropped",
			in:   "data: done\n\nid: 9\nevent: stdout\ndata: cut",
			want: []testEvent{{Event: "message", Data: "done"}},
		},
		{
			name: "unfinished event with a complete line is dropped",
			in:   "data: done\n\ndata: half\n",
			want: []testEvent{{Event: "message", Data: "done"}},
		},
		{
			name: "bom skipped once",
			in:   "\xEF\xBB\xBFdata: a\n\n\xEF\xBB\xBFdata: b\n\n",
			want: []testEvent{{Event: "message", Data: "a"}},
		},
		{
			name:  "retry and unknown fields",
			in:    "retry: 1500\nretry: x1\nfoo: bar\ndata: a\n\n",
			want:  []testEvent{{Event: "message", Data: "a"}},
			retry: 1500 * time.Millisecond,
		},
		{
			name: "colon in value and no space",
			in:   "event:exit\ndata:{\"a\":\"b:c\"}\n\n",
			want: []testEvent{{Event: "exit", Data: `{"a":"b:c"}`}},
		},
		{
			name: "empty stream",
			in:   "",
		},
	}
	readers := map[string]func(string) io.Reader{
		"whole":    func(s string) io.Reader { return strings.NewReader(s) },
		"one byte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"half":     func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
	}
	for _, tc := range tests {
		for rname, mk := range readers {
			t.Run(tc.name+"/"+rname, func(t *testing.T) {
				t.Parallel()
				got, p, err := readAll(mk(tc.in))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("events = %+v\nwant     %+v", got, tc.want)
				}
				if p.retry != tc.retry {
					t.Errorf("retry = %v, want %v", p.retry, tc.retry)
				}
			})
		}
	}
}

func TestSSEParserErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("connection reset")
	r := io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom))
	got, _, err := readAll(r)
	if !errors.Is(err, boom) || len(got) != 1 || got[0].Data != "a" {
		t.Errorf("events %+v err %v, want one event then %v", got, err, boom)
	}

	limited := func(s string) error {
		p := newSSEReader(strings.NewReader(s))
		p.max = 1000
		for {
			if _, err := p.next(); err != nil {
				return err
			}
		}
	}
	if err := limited("data: " + strings.Repeat("x", 990) + "\n\n"); !errors.Is(err, io.EOF) {
		t.Errorf("event within the limit: err = %v", err)
	}
	if err := limited("data: " + strings.Repeat("x", 1001) + "\n\n"); !errors.Is(err, errEventTooLarge) {
		t.Errorf("oversized line: err = %v", err)
	}
	if err := limited(strings.Repeat("data: "+strings.Repeat("y", 100)+"\n", 11) + "\n"); !errors.Is(err, errEventTooLarge) {
		t.Errorf("oversized event: err = %v", err)
	}
}

// FuzzSSEParser checks that the parser never panics and that neither how
// the bytes arrive (all at once or one by one) nor the size of its read
// buffer (lines in it or gathered across reads) changes what it reads.
func FuzzSSEParser(f *testing.F) {
	for _, s := range []string{
		"id: 1\nevent: stdout\ndata: {}\n\n",
		"data: a\r\ndata: b\r\r\n\n",
		":x\n\xEF\xBB\xBFdata\n\n",
		"retry: 10\nid: \x00\ndata:\n\n",
		"data: 0123456789abcdefghijklmnopqrstuvwxyz\r\ndata: x\n\ndata: 0123456789abcdefghijklmnopqrstuvwxyz\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		whole, p1, err1 := readAll(bytes.NewReader(b))
		bytewise, p2, err2 := readAll(iotest.OneByteReader(bytes.NewReader(b)))
		small, p3, err3 := readAllSize(iotest.HalfReader(bytes.NewReader(b)), 16)
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("errors %v %v %v", err1, err2, err3)
		}
		if !reflect.DeepEqual(whole, small) || p1.lastID != p3.lastID || p1.retry != p3.retry {
			t.Fatalf("whole %+v / %q, 16-byte buffer %+v / %q", whole, p1.lastID, small, p3.lastID)
		}
		if !reflect.DeepEqual(whole, bytewise) || p1.lastID != p2.lastID || p1.retry != p2.retry {
			t.Fatalf("whole %+v / %q, bytewise %+v / %q", whole, p1.lastID, bytewise, p2.lastID)
		}
		for _, ev := range whole {
			if strings.ContainsAny(ev.Event, "\r\n") || strings.ContainsAny(ev.ID, "\r\n\x00") {
				t.Fatalf("line break or NUL leaked into %+v", ev)
			}
		}
	})
}

// TestSSEParserBufferMoves reads events whose lines are longer than the
// read buffer, single data lines kept in place and events of several
// lines, through buffers that must slide and grow, in reads of every
// size: the events must come out as written, also when the caller keeps
// the data of one event while the next is read.
func TestSSEParserBufferMoves(t *testing.T) {
	t.Parallel()
	var in strings.Builder
	var want []testEvent
	for i := range 60 {
		long := strings.Repeat(string(rune('a'+i%26)), 1+i*i%97)
		switch i % 3 {
		case 0: // one data line, the JSON form's shape
			in.WriteString("id: " + strconv.Itoa(i) + "\nevent: stdout\ndata: " + long + "\n\n")
			want = append(want, testEvent{ID: strconv.Itoa(i), Event: "stdout", Data: long})
		case 1: // several lines, the text form's shape
			in.WriteString("id: " + strconv.Itoa(i) + "\nevent: stdout\ndata: 7\ndata: " + long + "\r\ndata: x\rdata:\n\n")
			want = append(want, testEvent{ID: strconv.Itoa(i), Event: "stdout", Data: "7\n" + long + "\nx\n"})
		case 2: // a long comment between
			in.WriteString(": " + long + "\ndata: " + long[:len(long)/2] + "\n\n")
			want = append(want, testEvent{ID: strconv.Itoa(i - 1), Event: "message", Data: long[:len(long)/2]})
		}
	}
	for _, size := range []int{16, 40, 100, 4096} {
		for _, rd := range []func(io.Reader) io.Reader{
			func(r io.Reader) io.Reader { return r },
			iotest.OneByteReader,
			iotest.HalfReader,
			iotest.DataErrReader,
		} {
			p := newSSEReaderSize(rd(strings.NewReader(in.String())), size)
			var got []testEvent
			var kept [][]byte // detached data, checked at the end
			var keptWant []string
			for {
				ev, err := p.next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("buffer %d: %v", size, err)
				}
				got = append(got, testEvent{ID: ev.ID, Event: ev.Event, Data: string(ev.Data)})
				if ev.detachable {
					kept, keptWant = append(kept, ev.Data), append(keptWant, string(ev.Data))
					p.detach()
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("buffer %d: got %d events %+v, want %d", size, len(got), got, len(want))
			}
			for i := range kept {
				if string(kept[i]) != keptWant[i] {
					t.Fatalf("buffer %d: detached data %d changed to %q, was %q", size, i, kept[i], keptWant[i])
				}
			}
		}
	}
}
