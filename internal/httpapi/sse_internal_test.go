package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSSEOutputEventMatchesJSON: the hand-written output event encodes the
// same JSON as sseOutput, for binary payloads too.
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
		var got sseOutput
		if err := json.Unmarshal([]byte(data), &got); err != nil {
			t.Fatalf("data is not JSON: %v", err)
		}
		dec, err := base64.StdEncoding.DecodeString(got.Data)
		if err != nil || got.Offset != 42 || !bytes.Equal(dec, payload) {
			t.Fatalf("decoded offset %d payload %d bytes (err %v), want 42 and %d bytes", got.Offset, len(dec), err, len(payload))
		}
	}
}
