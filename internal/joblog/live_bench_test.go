package joblog

import (
	"encoding/binary"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
)

// BenchmarkLiveFollow measures the CPU time per GiB of a job's bulk output
// appended in MiB frames (as the follower stores it) and read by a live
// reader after each append (as the SSE stream of a running job does). It
// is how an in-memory tail for live readers was judged and dropped: the
// file read of bytes just written costs less than the copy into a ring
// and out of it (≈ 0.40 vs 0.52 CPU-s/GiB for append and read). The reader
// reads every byte handed out (as the SSE writer does), so a reader that
// hands out bytes without touching them does not look cheap: with that,
// a mapped live reader and pread cost the same within the noise
// (≈ 0.44–0.46, interleaved, load ≈ 45: a live reader reads what was just
// written, still in the CPU's caches), so live readers read with pread;
// BenchmarkReplay shows the mapping's gain for a finished log.
func BenchmarkLiveFollow(b *testing.B) {
	const total = 256 << 20
	payload := make([]byte, agentproto.MaxFramePayload)
	for i := range payload {
		payload[i] = byte(i)
	}
	var cpu time.Duration
	var sum uint64
	s, _ := Open(b.TempDir())
	for i := 0; b.Loop(); i++ {
		id := "job_live" + string(rune('a'+i%26)) + time.Now().Format("150405.000000000")
		l, err := s.Get(id, true)
		if err != nil {
			b.Fatal(err)
		}
		r, err := l.NewReader(0)
		if err != nil {
			b.Fatal(err)
		}
		c0 := rusage(b)
		var got int64
		for off := int64(0); off < total; off += int64(len(payload)) {
			if err := l.Append(agentproto.Frame{Type: agentproto.FrameStdout, Offset: off, Payload: payload}); err != nil {
				b.Fatal(err)
			}
			if _, err := r.ReadAvailable(func(e Event) error { got += int64(len(e.Payload)); sum ^= xorWords(e.Payload); return nil }); err != nil {
				b.Fatal(err)
			}
		}
		cpu += rusage(b) - c0
		if got != total {
			b.Fatalf("read %d bytes, want %d", got, total)
		}
		r.Close()
		if err := s.Remove(id); err != nil {
			b.Fatal(err)
		}
	}
	if sum != 0 {
		b.Fatalf("xor of the payloads %#x, want 0 (an even count of equal frames)", sum)
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N)/(float64(total)/(1<<30)), "CPU-s/GiB")
}

// xorWords reads all of p, as the SSE writer does when it encodes an
// event: a reader that hands out bytes it never read would look cheap.
func xorWords(p []byte) uint64 {
	var x uint64
	for len(p) >= 8 {
		x ^= binary.LittleEndian.Uint64(p)
		p = p[8:]
	}
	return x
}

func rusage(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReplay measures the CPU time per GiB of reading a finished
// 256 MiB log (in the page cache) from the start, every byte of each
// payload read, as a replayed SSE stream does: ≈ 0.21 CPU-s/GiB through
// the mapping against ≈ 0.32 with pread into a buffer (interleaved runs).
func BenchmarkReplay(b *testing.B) {
	const total = 256 << 20
	payload := make([]byte, agentproto.MaxFramePayload)
	for i := range payload {
		payload[i] = byte(i)
	}
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	l, err := s.Get("job_replay", true)
	if err != nil {
		b.Fatal(err)
	}
	for off := int64(0); off < total; off += int64(len(payload)) {
		if err := l.Append(agentproto.Frame{Type: agentproto.FrameStdout, Offset: off, Payload: payload}); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Append(agentproto.Frame{Type: agentproto.FrameExit, Payload: []byte(`{"exit_code":0}`)}); err != nil {
		b.Fatal(err)
	}
	var cpu time.Duration
	var sum uint64
	for b.Loop() {
		r, err := l.NewReader(0)
		if err != nil {
			b.Fatal(err)
		}
		c0 := rusage(b)
		var got int64
		if _, err := r.ReadAvailable(func(e Event) error { got += int64(len(e.Payload)); sum ^= xorWords(e.Payload); return nil }); err != nil {
			b.Fatal(err)
		}
		cpu += rusage(b) - c0
		r.Close()
		if got != total+int64(len(`{"exit_code":0}`)) {
			b.Fatalf("read %d bytes, want %d and the exit", got, total)
		}
	}
	_ = sum
	b.ReportMetric(cpu.Seconds()/float64(b.N)/(float64(total)/(1<<30)), "CPU-s/GiB")
}
