package httpapi

import (
	"bytes"
	"testing"
)

// BenchmarkSSEOutput measures the encoding of one MiB of 97-byte log lines
// as a stdout event, in both encodings (the socket write is not included).
func BenchmarkSSEOutput(b *testing.B) {
	line := bytes.Repeat([]byte("x"), 96)
	payload := bytes.Repeat(append(line, '\n'), (1<<20)/97)
	for _, text := range []bool{false, true} {
		name := "base64"
		if text {
			name = "text"
		}
		b.Run(name, func(b *testing.B) {
			sw := &sseWriter{text: text}
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				sw.buf = sw.buf[:0]
				sw.appendOutput("12345", "stdout", 1<<30, payload)
			}
		})
	}
}
