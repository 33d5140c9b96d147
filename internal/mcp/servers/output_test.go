package servers

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/mcp"
)

func TestOutputMeter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		writes []string
		full   int    // the write after which full fires (1-based), 0: never
		passed string // what reached the bridge before the end
		ended  string // and after it
	}{
		{"under the soft limit", []string{"aa\n", "bb\n"}, 0, "aa\nbb\n", "aa\nbb\n"},
		{"past soft at a line's end", []string{"aaaaaaaa\n", "bb\n"}, 1, "aaaaaaaa\nbb\n", "aaaaaaaa\nbb\n"},
		{"past soft mid-line waits for its end", []string{"aaaaaaaaaa", "bb\n"}, 2, "aaaaaaaaaabb\n", "aaaaaaaaaabb\n"},
		{"a line's end inside a write", []string{"a\nbbbbbbbbbb", "b\ncc"}, 2, "a\nbbbbbbbbbbb\n", "a\nbbbbbbbbbbb\n"},
		// The planned stop may cut the line it fired in: it never passes.
		{"past hard without a line end", []string{"aa\naaaaaaa", "bbbbbbbbbb"}, 2, "aa\n", "aa\n"},
		// Without a planned stop a last line without newline is judged.
		{"a last line without newline", []string{"aa\n", "bb"}, 0, "aa\n", "aa\nbb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			fired := 0
			m := &outputMeter{w: &buf, soft: 8, hard: 16, full: func() { fired++ }}
			at := 0
			for i, w := range tc.writes {
				if n, err := m.Write([]byte(w)); err != nil || n != len(w) {
					t.Fatalf("write %q: %d %v", w, n, err)
				}
				if fired == 1 && at == 0 {
					at = i + 1
				}
			}
			if at != tc.full || fired > 1 {
				t.Errorf("full after write %d (fired %d times), want %d", at, fired, tc.full)
			}
			if buf.String() != tc.passed {
				t.Errorf("passed on %q, want %q", buf.String(), tc.passed)
			}
			if err := m.end(); err != nil || buf.String() != tc.ended {
				t.Errorf("at the end: %q %v, want %q", buf.String(), err, tc.ended)
			}
		})
	}
}

// TestOutputRolloverCutsNoLine: a server whose output reaches the hard
// limit in the middle of a line is stopped there (its log full, or killed
// mid-write); the bridge sees whole lines and a clean end, not a protocol
// breach, so the stop stays a planned restart.
func TestOutputRolloverCutsNoLine(t *testing.T) {
	t.Parallel()
	line := `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"` + strings.Repeat("x", 200) + `"}}` + "\n"
	pr, pw := io.Pipe()
	fired := false
	out := &outputMeter{w: pw, soft: int64(10*len(line) - 100), hard: int64(10*len(line) + 50), full: func() { fired = true }}
	stdio := mcp.NewStdio(pr, nopWriteCloser{}, 0, func(reason string) { t.Errorf("killed: %s", reason) })
	conn, err := stdio.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	go func() {
		// The server writes 11 lines, but its output is cut 50 bytes into
		// the 11th: what the agent's log or the kill leaves of it.
		all := strings.Repeat(line, 11)
		var err error
		for chunk := all[:10*len(line)+50]; chunk != "" && err == nil; {
			n := min(len(chunk), 333)
			_, err = out.Write([]byte(chunk[:n]))
			chunk = chunk[n:]
		}
		if err == nil {
			err = out.end()
		}
		pw.CloseWithError(err)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := 0
	for {
		if _, err := conn.Read(ctx); err != nil {
			break
		}
		got++
	}
	if b := stdio.Breach(); b != nil {
		t.Fatalf("the cut line is a protocol breach: %v", b)
	}
	if got != 10 || !fired {
		t.Errorf("%d messages reached the bridge (full fired: %v), want the 10 whole lines", got, fired)
	}
}

type nopWriteCloser struct{}

func (nopWriteCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriteCloser) Close() error                { return nil }
