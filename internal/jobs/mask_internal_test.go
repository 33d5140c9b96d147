package jobs

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/agent/agentproto"
)

// replay passes output through a masker's stream state in the chunks
// given and returns the bytes stored per stream, checking that the frames
// are contiguous from offset 0 as the job log needs them.
func replay(t *testing.T, m *masker, chunks []agentproto.Frame) map[agentproto.FrameType]string {
	t.Helper()
	st := m.streams()
	got := map[agentproto.FrameType]*bytes.Buffer{agentproto.FrameStdout: {}, agentproto.FrameStderr: {}}
	var exit bool
	for _, fr := range append(chunks, agentproto.Frame{Type: agentproto.FrameExit, Payload: []byte("{}")}) {
		for _, out := range st.pass(fr) {
			switch out.Type {
			case agentproto.FrameExit:
				exit = true
			case agentproto.FrameStdout, agentproto.FrameStderr:
				if exit {
					t.Fatalf("output after the exit frame: %+v", out)
				}
				if b := got[out.Type]; int64(b.Len()) != out.Offset {
					t.Fatalf("stream %d: frame at %d, have %d bytes", out.Type, out.Offset, b.Len())
				}
				got[out.Type].Write(out.Payload)
			}
		}
	}
	if !exit {
		t.Fatal("the exit frame was not passed on")
	}
	return map[agentproto.FrameType]string{agentproto.FrameStdout: got[agentproto.FrameStdout].String(), agentproto.FrameStderr: got[agentproto.FrameStderr].String()}
}

// chunked splits each stream's text into frames at the given cut points.
func chunked(t agentproto.FrameType, text string, cuts ...int) []agentproto.Frame {
	var out []agentproto.Frame
	prev := 0
	for _, c := range append(cuts, len(text)) {
		out = append(out, agentproto.Frame{Type: t, Offset: int64(prev), Payload: []byte(text[prev:c])})
		prev = c
	}
	return out
}

func TestMaskerHidesSecretsAcrossFrames(t *testing.T) {
	t.Parallel()
	const secret = "sk-live-0123456789"
	stars := strings.Repeat("*", len(secret))
	m := newMasker([]string{secret, ""})
	line := `{"jsonrpc":"2.0","id":1,"result":{"text":"token=` + secret + `"}}` + "\n"
	for cut := 1; cut < len(line); cut++ {
		got := replay(t, m, chunked(agentproto.FrameStdout, line, cut))
		if want := strings.ReplaceAll(line, secret, stars); got[agentproto.FrameStdout] != want {
			t.Fatalf("cut at %d: %q, want %q", cut, got[agentproto.FrameStdout], want)
		}
	}
	// Byte by byte, with the stream ending inside a value: the tail that
	// began it is masked too.
	text := "a " + secret + " b " + secret[:7]
	var frames []agentproto.Frame
	for i := range len(text) {
		frames = append(frames, agentproto.Frame{Type: agentproto.FrameStderr, Offset: int64(i), Payload: []byte{text[i]}})
	}
	if got := replay(t, m, frames)[agentproto.FrameStderr]; got != "a "+stars+" b *******" {
		t.Errorf("byte by byte: %q", got)
	}
}

func TestMaskerJSONFormsAndOverlaps(t *testing.T) {
	t.Parallel()
	secret := `p"a<ss\word`
	m := newMasker([]string{secret, "aXa"})
	for _, tc := range []struct{ in, want string }{
		{`{"v":"p\"a<ss\\word"}`, `{"v":"` + strings.Repeat("*", len(`p\"a<ss\\word`)) + `"}`},
		{`{"v":"p\"a\u003css\\word"}`, `{"v":"` + strings.Repeat("*", len(`p\"a\u003css\\word`)) + `"}`},
		{"raw " + secret + "!", "raw " + strings.Repeat("*", len(secret)) + "!"},
		{"aXaXa", "*****"}, // overlapping occurrences
		{"no secret here", "no secret here"},
	} {
		if got := string(m.all([]byte(tc.in))); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
		if got := replay(t, m, chunked(agentproto.FrameStdout, tc.in, len(tc.in)/2))[agentproto.FrameStdout]; got != tc.want {
			t.Errorf("%q in two frames: %q, want %q", tc.in, got, tc.want)
		}
	}
	if newMasker(nil) != nil || newMasker([]string{""}) != nil {
		t.Error("a masker with nothing to hide")
	}
}

// TestMaskerRandomChunks: however output is cut into frames, what is
// stored is the whole output with every occurrence masked, and output is
// held back only where a value may begin (a line ending in a newline is
// stored whole at once).
func TestMaskerRandomChunks(t *testing.T) {
	t.Parallel()
	secrets := []string{"abcabd", "zz9"}
	m := newMasker(secrets)
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := "abcdz9 \n"
	for range 2000 {
		var b strings.Builder
		for range r.IntN(60) {
			if r.IntN(8) == 0 {
				b.WriteString(secrets[r.IntN(2)])
			} else {
				b.WriteByte(alphabet[r.IntN(len(alphabet))])
			}
		}
		text := b.String()
		var cuts []int
		for i := 1; i < len(text); i++ {
			if r.IntN(4) == 0 {
				cuts = append(cuts, i)
			}
		}
		want := string(m.all([]byte(text)))
		// The stream may end inside a value: the open tail is masked too.
		if k := m.openPrefix([]byte(text)); k > 0 {
			want = want[:len(want)-k] + strings.Repeat("*", k)
		}
		if got := replay(t, m, chunked(agentproto.FrameStdout, text, cuts...))[agentproto.FrameStdout]; got != want {
			t.Fatalf("%q cut at %v: %q, want %q", text, cuts, got, want)
		}
	}
	st := m.streams()
	if out := st.pass(agentproto.Frame{Type: agentproto.FrameStdout, Payload: []byte("{\"id\":1}\n")}); len(out) != 1 || string(out[0].Payload) != "{\"id\":1}\n" {
		t.Errorf("a whole line was held back: %+v", out)
	}
}
