package servers

import (
	"bytes"
	"strings"
	"testing"
)

func TestOutputMeter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		writes []string
		full   int // the write after which full fires (1-based), 0: never
	}{
		{"under the soft limit", []string{"aa\n", "bb\n"}, 0},
		{"past soft at a line's end", []string{"aaaaaaaa\n", "bb\n"}, 1},
		{"past soft mid-line waits for its end", []string{"aaaaaaaaaa", "bb\n"}, 2},
		{"past hard without a line end", []string{"aaaaaaaaaa", "bbbbbbbbbb"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			fired := 0
			m := &outputMeter{w: &buf, soft: 8, hard: 16, full: func() { fired++ }}
			at := 0
			for i, w := range tc.writes {
				if _, err := m.Write([]byte(w)); err != nil {
					t.Fatal(err)
				}
				if fired == 1 && at == 0 {
					at = i + 1
				}
			}
			if at != tc.full || fired > 1 {
				t.Errorf("full after write %d (fired %d times), want %d", at, fired, tc.full)
			}
			if buf.String() != strings.Join(tc.writes, "") {
				t.Errorf("passed on %q", buf.String())
			}
		})
	}
}
