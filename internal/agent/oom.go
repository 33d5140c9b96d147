package agent

import (
	"bytes"
	"os"
	"strconv"
)

// oomCounter reads the memory cgroup's cumulative OOM-kill counter of the
// container the agent runs in.
type oomCounter struct {
	path string // "" when no readable counter exists
}

// DefaultOOMCounterFiles returns the files that hold the memory cgroup's
// oom_kill counter as mounted inside a container: cgroup v1, then v2.
func DefaultOOMCounterFiles() []string {
	return []string{
		"/sys/fs/cgroup/memory/memory.oom_control",
		"/sys/fs/cgroup/memory.events",
	}
}

// newOOMCounter picks the first counter file that exists and parses.
func newOOMCounter(files []string) oomCounter {
	for _, f := range files {
		c := oomCounter{path: f}
		if _, ok := c.read(); ok {
			return c
		}
	}
	return oomCounter{}
}

// read returns the current oom_kill count; ok is false if it is unreadable.
func (c oomCounter) read() (uint64, bool) {
	if c.path == "" {
		return 0, false
	}
	b, err := os.ReadFile(c.path)
	if err != nil {
		return 0, false
	}
	return parseOOMKill(b)
}

// parseOOMKill finds the "oom_kill N" line of memory.oom_control (v1) or
// memory.events (v2).
func parseOOMKill(b []byte) (uint64, bool) {
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		k, v, ok := bytes.Cut(line, []byte{' '})
		if !ok || string(k) != "oom_kill" {
			continue
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil {
			return 0, false
		}
		return n, true
	}
	return 0, false
}
