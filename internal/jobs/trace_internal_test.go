package jobs

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/trace"
)

// TestJobEventDataIsTheMapsEncoding: the struct encoding of a job's trace
// event is byte for byte the map encoding it replaces, for every shape of
// job, and a huge script still leaves only its size.
func TestJobEventDataIsTheMapsEncoding(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	end := start.Add(1500 * time.Millisecond)
	zero, seven := 0, 7
	jobs := map[string]*sandbox.Job{
		"command": {ID: "job_1", Mode: sandbox.JobModeSync, Command: []string{"true"}, StartedAt: &start},
		"script":  {ID: "job_2", Mode: sandbox.JobModeBackground, Script: "echo <a> & 'b'"},
		"no mode": {ID: "job_3", Command: []string{"x"}},
		"exit 0": {ID: "job_4", Mode: sandbox.JobModeSync, Command: []string{"true"}, State: sandbox.JobSucceeded,
			ExitCode: &zero, ExitReason: sandbox.ExitExited, StartedAt: &start, FinishedAt: &end},
		"failed": {ID: "job_5", Mode: sandbox.JobModeSync, Script: "exit 7", State: sandbox.JobFailed, ExitCode: &seven,
			ExitReason: sandbox.ExitExited, StartedAt: &start, FinishedAt: &end},
		"lost": {ID: "job_6", Mode: sandbox.JobModeSync, Command: []string{"sleep", "9"}, State: sandbox.JobLost,
			ExitReason: sandbox.ExitLost, Error: "agent gone", StartedAt: &start, FinishedAt: &end},
		"not started":    {ID: "job_7", Mode: sandbox.JobModeSync, Command: []string{"a"}, State: sandbox.JobCanceled, FinishedAt: &end},
		"huge script":    {ID: "job_8", Mode: sandbox.JobModeSync, Script: strings.Repeat("x", trace.MaxDataBytes)},
		"escaped script": {ID: "job_9", Mode: sandbox.JobModeSync, Script: strings.Repeat("\x01", trace.MaxDataBytes/5)},
		"huge command":   {ID: "job_10", Mode: sandbox.JobModeSync, Command: []string{strings.Repeat("c", trace.MaxDataBytes/2)}},
	}
	for name, j := range jobs {
		for _, kind := range []trace.Kind{trace.KindJobStarted, trace.KindJobFinished} {
			want, werr := jobEventMap(j, kind)
			got, gerr := jobEventData(j, kind)
			if !bytes.Equal(got, want) || (werr == nil) != (gerr == nil) {
				t.Errorf("%s, %s: got %.200s (%v), want %.200s (%v)", name, kind, got, gerr, want, werr)
			}
		}
	}
	if b, _ := jobEventData(jobs["huge script"], trace.KindJobStarted); !bytes.Contains(b, []byte(`"script_bytes":65536`)) || bytes.Contains(b, []byte(`"script":`)) {
		t.Errorf("huge script's event: %.200s", b)
	}
}

// BenchmarkJobEventData compares the struct encoding of an exec's end
// event with the map encoding.
func BenchmarkJobEventData(b *testing.B) {
	start := time.Now()
	end, code := start.Add(time.Millisecond), 0
	j := &sandbox.Job{ID: sandbox.NewID("job"), Mode: sandbox.JobModeSync, Command: []string{"true"}, State: sandbox.JobSucceeded,
		ExitCode: &code, ExitReason: sandbox.ExitExited, StartedAt: &start, FinishedAt: &end}
	for _, f := range []struct {
		name string
		fn   func(*sandbox.Job, trace.Kind) ([]byte, error)
	}{{"struct", jobEventData}, {"map", jobEventMap}} {
		b.Run(f.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.fn(j, trace.KindJobFinished); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
