package bench

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func readEvents(t *testing.T, stream string, size int) ([]SSEEvent, error) {
	t.Helper()
	r := NewSSEReader(strings.NewReader(stream), size)
	var out []SSEEvent
	for {
		ev, err := r.Next()
		if err != nil {
			return out, err
		}
		ev.Data = bytes.Clone(ev.Data)
		out = append(out, ev)
	}
}

func TestSSEReader(t *testing.T) {
	long := strings.Repeat("x", 100)
	stream := ": keepalive\n\n" +
		"id: 0\nevent: job\ndata: {\"id\":\"job_1\"}\n\n" +
		"id: 7\r\nevent: stdout\r\ndata:" + long + "\r\n\r\n" +
		"data: a\ndata:  b\nretry: 10\nunknown: x\nnovalue\n\n" +
		"event: lonely\n\n" + // no data: not dispatched, the name is dropped
		"id: 9\nid: 1\x002\ndata\n\n" + // an id holding NUL is ignored; "data" alone is an empty data line
		"event: cut\ndata: never dispatched\n"
	evs, err := readEvents(t, stream, 16) // smaller than the long line
	if !errors.Is(err, io.EOF) {
		t.Fatalf("err = %v, want io.EOF", err)
	}
	want := []SSEEvent{
		{ID: "0", Name: "job", Data: []byte(`{"id":"job_1"}`)},
		{ID: "7", Name: "stdout", Data: []byte(long)},
		{ID: "7", Name: "message", Data: []byte("a\n b")},
		{ID: "9", Name: "message", Data: []byte("")},
	}
	if len(evs) != len(want) {
		t.Fatalf("got %d events %q, want %d", len(evs), evs, len(want))
	}
	for i := range want {
		if evs[i].ID != want[i].ID || evs[i].Name != want[i].Name || !bytes.Equal(evs[i].Data, want[i].Data) {
			t.Errorf("event %d = {%q %q %q}, want {%q %q %q}", i,
				evs[i].ID, evs[i].Name, evs[i].Data, want[i].ID, want[i].Name, want[i].Data)
		}
	}
}

func TestSSEReaderCutLine(t *testing.T) {
	for _, size := range []int{16, 4096} {
		_, err := readEvents(t, "data: x\n\ndata: "+strings.Repeat("y", 40), size)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("buffer %d: err = %v, want io.ErrUnexpectedEOF", size, err)
		}
	}
}

func TestDecodeOutput(t *testing.T) {
	payload := []byte("hi\n\x00\xff binary")
	b64 := base64.StdEncoding.EncodeToString(payload)
	// What the service sends (encoding/json of {offset, data}).
	service, err := json.Marshal(struct {
		Offset int64  `json:"offset"`
		Data   string `json:"data"`
	}{42, b64})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data string
		off  int64
		want []byte
	}{
		{"service encoding", string(service), 42, payload},
		{"empty", `{"offset":0,"data":""}`, 0, []byte{}},
		{"other key order", `{"data":"` + b64 + `","offset":42}`, 42, payload},
		{"spaces", `{ "offset": 42, "data": "` + b64 + `" }`, 42, payload},
		{"escaped slash", `{"offset":1,"data":"` + "\\/w==" + `"}`, 1, []byte{0xff}},
		{"text", "7\nhi\n\x00 there\n", 7, []byte("hi\n\x00 there\n")},
		{"text, empty", "0\n", 0, []byte{}},
	} {
		dst := make([]byte, 0, 4)
		off, got, err := DecodeOutput([]byte(tc.data), dst)
		if err != nil || off != tc.off || !bytes.Equal(got, tc.want) {
			t.Errorf("%s: DecodeOutput = %d, %q, %v; want %d, %q", tc.name, off, got, err, tc.off, tc.want)
		}
	}
	for _, bad := range []string{
		`{"offset":-1,"data":""}`, `{"data":""}`, `{"offset":1}`, `{"offset":1,"data":"!!"}`, `not json`, "12", "-1\nx", "+1\nx", "1x\nx",
	} {
		if _, _, err := DecodeOutput([]byte(bad), nil); err == nil {
			t.Errorf("DecodeOutput(%s) succeeded", bad)
		}
	}
}
