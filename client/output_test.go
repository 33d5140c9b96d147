package client

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"genesis.dev/sandbox/api"
)

// serviceStream writes out as the service streams a job's stdout: events
// of up to chunk bytes, in the text form when text is set (one data line
// per line of output, as the service splits it), else in the JSON form,
// then an exit event.
func serviceStream(out []byte, chunk int, text bool) []byte {
	var b []byte
	var cursor int64
	for off := 0; off < len(out); off += chunk {
		p := out[off:min(off+chunk, len(out))]
		cursor += 8 + int64(len(p))
		b = fmt.Appendf(b, "id: %d\nevent: stdout\n", cursor)
		if text {
			b = fmt.Appendf(b, "data: %d", off)
			for _, line := range bytes.SplitAfter(p, []byte{'\n'}) {
				if len(line) > 0 || p[len(p)-1] == '\n' {
					b = append(b, "\ndata: "...)
					b = append(b, bytes.TrimSuffix(line, []byte{'\n'})...)
				}
			}
			b = append(b, "\n\n"...)
		} else {
			b = fmt.Appendf(b, "data: {\"offset\":%d,\"data\":\"%s\"}\n\n", off, base64.StdEncoding.EncodeToString(p))
		}
	}
	code := 0
	x, _ := json.Marshal(ExitEvent{JobID: "job_1", State: "succeeded", ExitCode: &code, ExitReason: "exited", StdoutBytes: int64(len(out))})
	return fmt.Appendf(b, "id: %d\nevent: exit\ndata: %s\n\n", cursor+8, x)
}

// logLines is n bytes of repeated log lines.
func logLines(n int) []byte {
	line := []byte("2026-11-30T10:00:00.000Z INFO worker=7 GET /api/v1/items?page=2 status=200 bytes=5120 took=3.2ms\n")
	return bytes.Repeat(line, n/len(line)+1)[:n]
}

// TestConsumeLargeEvents reads events far larger than the read buffer, in
// both forms and with reads of every size, and checks every byte.
func TestConsumeLargeEvents(t *testing.T) {
	t.Parallel()
	out := logLines(3<<20 + 12345)
	for _, text := range []bool{false, true} {
		body := serviceStream(out, 1<<20+7, text)
		for _, rd := range []struct {
			name string
			r    func() io.Reader
		}{
			{"whole", func() io.Reader { return bytes.NewReader(body) }},
			{"4 KiB reads", func() io.Reader { return &chunkReader{b: body, n: 4 << 10} }},
			{"odd reads", func() io.Reader { return &chunkReader{b: body, n: 97*1024 + 13} }},
		} {
			t.Run(fmt.Sprintf("text=%v/%s", text, rd.name), func(t *testing.T) {
				t.Parallel()
				var got []byte
				var exit *ExitEvent
				s := newLogStream(func(ev LogEvent) error {
					switch ev.Event {
					case EventStdout:
						if ev.Offset != int64(len(got)) {
							return fmt.Errorf("offset %d after %d bytes", ev.Offset, len(got))
						}
						got = append(got, ev.Data...)
					case EventExit:
						exit = ev.Exit
					}
					return nil
				})
				if err := s.consume(rd.r()); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, out) || exit == nil || exit.StdoutBytes != int64(len(out)) {
					t.Fatalf("got %d bytes (equal: %v), exit %+v; want %d", len(got), bytes.Equal(got, out), exit, len(out))
				}
			})
		}
	}
}

// chunkReader returns b in reads of at most n bytes.
type chunkReader struct {
	b []byte
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), c.n)], c.b)
	c.b = c.b[k:]
	return k, nil
}

// FuzzDecodeOutput checks that the hand parser of the JSON form agrees
// with encoding/json wherever it answers, and that decodeOutput never
// panics.
func FuzzDecodeOutput(f *testing.F) {
	for _, s := range []string{
		`{"offset":0,"data":"aGkK"}`,
		`{"offset":12,"data":"b29wcwo="}`,
		`{"offset":01,"data":"aGkK"}`,
		`{"offset":1,"data":"aG\nkK"}`,
		`{"offset":1,"data":"aG\/kK"}`,
		`{"offset":99999999999999999999,"data":""}`,
		`{"offset":1,"data":"QQ=="}"}`,
		"5\nhello",
		`{"offset":-1,"data":""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		off, b, ok := decodeOutputJSON(data)
		if ok {
			var o api.OutputEvent
			if err := json.Unmarshal(data, &o); err != nil {
				t.Fatalf("fast path took %q, encoding/json refuses it: %v", data, err)
			}
			want, err := base64.StdEncoding.DecodeString(o.Data)
			if err != nil || o.Offset != off || !bytes.Equal(b, want) {
				t.Fatalf("%q: fast path %d %q, encoding/json %d %q (%v)", data, off, b, o.Offset, want, err)
			}
		}
		_, _, _ = decodeOutput(data, false)
		_, _, _ = decodeOutput(bytes.Clone(data), true)
	})
}

// bothBase64Paths runs fn with decodeBase64's vector decoder (where this
// CPU has it) and with its table. Its callers must not run in parallel
// with other tests that decode.
func bothBase64Paths(t testing.TB, fn func()) {
	was := vectorBase64
	defer func() { vectorBase64 = was }()
	for _, v := range []bool{was, false} {
		vectorBase64 = v
		fn()
		if !was {
			return
		}
	}
}

// TestDecodeBase64Paths checks both of decodeBase64's paths against the
// standard decoder on every length up to 600 and on inputs the standard
// decoder refuses.
func TestDecodeBase64Paths(t *testing.T) {
	var inputs [][]byte
	for n := range 600 {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i*131 + n*7)
		}
		enc := []byte(base64.StdEncoding.EncodeToString(src))
		inputs = append(inputs, enc)
		if len(enc) > 0 {
			for _, bad := range []byte{'"', '\\', '=', '-', 0x80} {
				for _, at := range []int{0, len(enc) / 2, len(enc) - 1} {
					b := bytes.Clone(enc)
					b[at] = bad
					inputs = append(inputs, b)
				}
			}
		}
	}
	bothBase64Paths(t, func() {
		for _, src := range inputs {
			dst := make([]byte, base64.StdEncoding.DecodedLen(len(src)))
			n, ok := decodeBase64(dst, src)
			want, err := base64.StdEncoding.DecodeString(string(src))
			if ok != (err == nil) || ok && !bytes.Equal(dst[:n], want) {
				t.Fatalf("vector %v, %q: decodeBase64 %q %v; standard %q %v", vectorBase64, src, dst[:n], ok, want, err)
			}
		}
	})
}

// FuzzDecodeBase64 checks decodeBase64 against the standard decoder: the
// same bytes wherever it answers, an answer for every valid encoding.
func FuzzDecodeBase64(f *testing.F) {
	for _, s := range []string{"", "QQ==", "QUJD", "QUJDREVGR0hJSktM", "QUJDREVGR0hJSk==", "QUJD=EVGR0hJSktMTU5P", "QU\nJDREVGR0hJSktMTU5P", strings.Repeat("QUJD", 100)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		if bytes.ContainsAny(src, "\r\n") {
			return // decodeOutputJSON leaves these to encoding/json
		}
		bothBase64Paths(t, func() {
			dst := make([]byte, base64.StdEncoding.DecodedLen(len(src)))
			n, ok := decodeBase64(dst, src)
			want, err := base64.StdEncoding.DecodeString(string(src))
			if ok != (err == nil) || ok && !bytes.Equal(dst[:n], want) {
				t.Fatalf("vector %v, %q: decodeBase64 %q %v; standard %q %v", vectorBase64, src, dst[:n], ok, want, err)
			}
		})
	})
}

// BenchmarkConsume measures the client's reading of a job's output as the
// service streams it (1 MiB events of log lines), per encoding, and for
// base64 with the table decoder too.
func BenchmarkConsume(b *testing.B) {
	out := logLines(64 << 20)
	was := vectorBase64
	defer func() { vectorBase64 = was }()
	for _, c := range []struct {
		name         string
		text, vector bool
	}{{"text=false", false, true}, {"text=false/table", false, false}, {"text=true", true, was}} {
		if c.vector && !was {
			continue // this CPU has no vector decoder
		}
		body := serviceStream(out, 1<<20, c.text)
		b.Run(c.name, func(b *testing.B) {
			vectorBase64 = c.vector
			b.SetBytes(int64(len(out)))
			for b.Loop() {
				n := 0
				s := newLogStream(func(ev LogEvent) error { n += len(ev.Data); return nil })
				if err := s.consume(bytes.NewReader(body)); err != nil || n != len(out) {
					b.Fatal(err, n)
				}
			}
		})
	}
}
