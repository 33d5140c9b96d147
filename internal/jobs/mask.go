package jobs

import (
	"bytes"
	"encoding/json"
	"slices"

	"genesis.dev/sandbox/internal/agent/agentproto"
)

// maskByte overwrites each byte of a secret value in a job's output.
const maskByte = '*'

// masker hides known secret values in a job's output before it is stored:
// every occurrence of a value, as it is and as it appears inside a JSON
// string, is overwritten with maskByte, byte for byte. The length stays, so
// the stream offsets (where the agent resumes a stream, what it may drop)
// stay those of the process's own output, and JSON text stays JSON. It
// catches the exact values only: a process that encodes a value otherwise
// (base64, split across lines) shows it.
type masker struct {
	values [][]byte // longest first
}

// newMasker is the masker of secrets, or nil when there is nothing to hide.
func newMasker(secrets []string) *masker {
	var values [][]byte
	add := func(v []byte) {
		if len(v) > 0 && !slices.ContainsFunc(values, func(o []byte) bool { return bytes.Equal(o, v) }) {
			values = append(values, v)
		}
	}
	for _, s := range secrets {
		add([]byte(s))
		// As a JSON encoder writes it inside a string: Go's (HTML
		// characters escaped) and the plain form other languages write.
		for _, html := range []bool{true, false} {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(html)
			if enc.Encode(s) == nil {
				q := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
				add(bytes.Clone(q[1 : len(q)-1]))
			}
		}
	}
	if len(values) == 0 {
		return nil
	}
	slices.SortFunc(values, func(a, b []byte) int { return len(b) - len(a) })
	return &masker{values: values}
}

// all masks a whole output (a synchronous exec's), in place.
func (m *masker) all(b []byte) []byte {
	m.mark(b, make([]bool, len(b)))
	return b
}

// mark masks every occurrence of a value in b, in place, and records the
// masked bytes in masked.
func (m *masker) mark(b []byte, masked []bool) {
	for _, v := range m.values {
		for from := 0; ; {
			i := bytes.Index(b[from:], v)
			if i < 0 {
				break
			}
			for j := from + i; j < from+i+len(v); j++ {
				masked[j] = true
			}
			from += i + 1
		}
	}
	for i, x := range masked {
		if x {
			b[i] = maskByte
		}
	}
}

// openPrefix is the length of the longest tail of b that is a proper
// prefix of a value: bytes that the next chunk may complete into one.
func (m *masker) openPrefix(b []byte) int {
	best := 0
	for _, v := range m.values {
		for k := min(len(v)-1, len(b)); k > best; k-- {
			if bytes.Equal(b[len(b)-k:], v[:k]) {
				best = k
				break
			}
		}
	}
	return best
}

// streams is the masking state of one stream of frames from the agent:
// per output stream, the tail held back because it may begin a value.
// Frames within one stream from the agent are contiguous; a new stream
// (a follower resuming where the log ends) starts with a new state, and
// the agent sends what was held back again.
func (m *masker) streams() *maskStreams {
	return &maskStreams{m: m, held: map[agentproto.FrameType]*heldTail{}}
}

type maskStreams struct {
	m    *masker
	held map[agentproto.FrameType]*heldTail
}

// heldTail is output not yet stored: its bytes as the process wrote them
// and which of them are masked already.
type heldTail struct {
	at     int64
	orig   []byte
	masked []bool
}

// pass takes one frame from the agent and returns the frames to store:
// output masked, less a held tail; the held tails, masked whole, before a
// stream's truncation mark or the exit frame (nothing follows them).
func (s *maskStreams) pass(fr agentproto.Frame) []agentproto.Frame {
	switch fr.Type {
	case agentproto.FrameStdout, agentproto.FrameStderr:
		return s.output(fr)
	case agentproto.FrameTruncated:
		if len(fr.Payload) == 1 {
			return append(s.flush(agentproto.FrameType(fr.Payload[0])), fr)
		}
	case agentproto.FrameExit:
		return append(append(s.flush(agentproto.FrameStdout), s.flush(agentproto.FrameStderr)...), fr)
	}
	return []agentproto.Frame{fr}
}

func (s *maskStreams) output(fr agentproto.Frame) []agentproto.Frame {
	var frames []agentproto.Frame
	at, orig, masked := fr.Offset, bytes.Clone(fr.Payload), make([]bool, len(fr.Payload))
	if h := s.held[fr.Type]; h != nil && h.at+int64(len(h.orig)) == fr.Offset {
		delete(s.held, fr.Type)
		at, orig, masked = h.at, append(h.orig, orig...), append(h.masked, masked...)
	} else {
		frames = s.flush(fr.Type) // not contiguous (never within one stream)
	}
	out := bytes.Clone(orig)
	s.m.mark(out, masked)
	keep := s.m.openPrefix(orig)
	if keep > 0 {
		n := len(orig) - keep
		s.held[fr.Type] = &heldTail{at: at + int64(n), orig: orig[n:], masked: masked[n:]}
		out = out[:n]
	}
	if len(out) == 0 {
		return frames
	}
	return append(frames, agentproto.Frame{Type: fr.Type, Offset: at, Payload: out})
}

// flush masks a held tail whole (it began a value the stream then ended
// in) and returns it as a frame.
func (s *maskStreams) flush(t agentproto.FrameType) []agentproto.Frame {
	h := s.held[t]
	if h == nil {
		return nil
	}
	delete(s.held, t)
	return []agentproto.Frame{{Type: t, Offset: h.at, Payload: bytes.Repeat([]byte{maskByte}, len(h.orig))}}
}
