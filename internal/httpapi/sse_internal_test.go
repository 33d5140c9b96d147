package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"genesis.dev/sandbox/api"
)

// TestSSEOutputEventMatchesJSON: the hand-written output event encodes the
// same JSON as api.OutputEvent, for binary payloads too.
func TestSSEOutputEventMatchesJSON(t *testing.T) {
	t.Parallel()
	for _, payload := range [][]byte{nil, []byte("hi\n"), {0, 0xff, '"', '\\', '\n'}, bytes.Repeat([]byte{0xfe}, 70000)} {
		rec := httptest.NewRecorder()
		sw := &sseWriter{w: rec}
		if err := sw.output("123", "stderr", 42, payload); err != nil {
			t.Fatal(err)
		}
		ev := string(sw.buf)
		if !strings.HasPrefix(ev, "id: 123\nevent: stderr\ndata: ") || !strings.HasSuffix(ev, "\n\n") {
			t.Fatalf("event framing: %q", ev[:min(len(ev), 60)])
		}
		data := strings.TrimSuffix(strings.TrimPrefix(ev, "id: 123\nevent: stderr\ndata: "), "\n\n")
		var got api.OutputEvent
		if err := json.Unmarshal([]byte(data), &got); err != nil {
			t.Fatalf("data is not JSON: %v", err)
		}
		dec, err := base64.StdEncoding.DecodeString(got.Data)
		if err != nil || got.Offset != 42 || !bytes.Equal(dec, payload) {
			t.Fatalf("decoded offset %d payload %d bytes (err %v), want 42 and %d bytes", got.Offset, len(dec), err, len(payload))
		}
	}
}

// TestSSEOutputTextForm: in text mode, bytes that are UTF-8 without CR,
// short lines too, go as "<offset>\n<bytes>" data lines; anything else
// keeps the JSON form. Either way an SSE parser gets
// the exact bytes back.
func TestSSEOutputTextForm(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 40)
	for _, tc := range []struct {
		payload string
		text    bool
	}{
		{"", true},
		{long, true},
		{long + "\n", true},
		{long + "\n\n" + long + "\n", true},
		{" leading space and a trailing one " + long + " ", true},
		{"zero \x00 bytes and ünïcödé " + long, true},
		{"y\ny\ny\ny\n", true}, // short lines: text, as asked
		{"1\n", true},
		{long + "\r\n" + long, false},     // CR ends an SSE line
		{long + "\xff\xfe" + long, false}, // not UTF-8
		{long + "\xe2\x82", false},        // a character cut at the end
		{strings.Repeat(long+"\n", 5000), true},
	} {
		sw := &sseWriter{w: httptest.NewRecorder(), text: true}
		if err := sw.output("9", "stdout", 5, []byte(tc.payload)); err != nil {
			t.Fatal(err)
		}
		data := sseData(t, string(sw.buf))
		if isJSON := strings.HasPrefix(data, "{"); isJSON == tc.text {
			t.Errorf("%.40q: text form %v, want %v", tc.payload, !isJSON, tc.text)
		}
		var off int64
		var got []byte
		if tc.text {
			head, rest, ok := strings.Cut(data, "\n")
			if !ok || head != "5" {
				t.Fatalf("%.40q: text data %.60q does not start with the offset line", tc.payload, data)
			}
			off, got = 5, []byte(rest)
		} else {
			var o api.OutputEvent
			if err := json.Unmarshal([]byte(data), &o); err != nil {
				t.Fatalf("%.40q: data is not JSON: %v", tc.payload, err)
			}
			b, err := base64.StdEncoding.DecodeString(o.Data)
			if err != nil {
				t.Fatal(err)
			}
			off, got = o.Offset, b
		}
		if off != 5 || string(got) != tc.payload {
			t.Errorf("%.40q: decoded offset %d, %.40q", tc.payload, off, got)
		}
	}
}

// sseData parses one event as an SSE client does and returns its data:
// the data fields' values (one leading space removed) joined with LF.
func sseData(t *testing.T, ev string) string {
	t.Helper()
	body, ok := strings.CutSuffix(ev, "\n\n")
	if !ok {
		t.Fatalf("event %.60q does not end with a blank line", ev)
	}
	var data []string
	for _, line := range strings.Split(body, "\n") {
		if strings.ContainsRune(line, '\r') {
			t.Fatalf("event line %.60q holds a CR", line)
		}
		field, value, _ := strings.Cut(line, ":")
		if field == "data" {
			data = append(data, strings.TrimPrefix(value, " "))
		}
	}
	return strings.Join(data, "\n")
}
