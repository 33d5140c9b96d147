package agent

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// oomCounter reads the memory cgroup's cumulative OOM-kill counter of the
// container the agent runs in. Every exec reads it before it starts, so the
// file is kept open and read with one pread at offset 0, which makes the
// kernel (and gVisor) generate it afresh: 1 system call instead of the 9 of
// an open, read and close through the runtime's poller.
type oomCounter struct {
	path string   // "" when no readable counter exists
	f    *os.File // path kept open; nil: read it whole each time
	// fd is f's descriptor, taken once: File.Fd costs an fcntl on every
	// call for a file the runtime's poller accepted (cgroup v1 files can
	// be polled), a trap into the sentry under gVisor on every exec.
	fd int
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
		if _, ok := c.read(); !ok {
			continue
		}
		if fh, err := os.Open(f); err == nil {
			c.f = fh
			c.fd = int(fh.Fd()) // into blocking mode now, once: pread needs no poller
			if _, ok := c.read(); !ok {
				fh.Close()
				c.f = nil
			}
		}
		return c
	}
	return oomCounter{}
}

// oomCounterMax bounds the counter file: memory.oom_control and
// memory.events are well below it.
const oomCounterMax = 1024

// read returns the current oom_kill count; ok is false if it is unreadable.
func (c oomCounter) read() (uint64, bool) {
	if c.path == "" {
		return 0, false
	}
	if c.f != nil {
		var buf [oomCounterMax]byte
		for {
			n, err := syscall.Pread(c.fd, buf[:], 0)
			if err == syscall.EINTR {
				continue
			}
			if err == nil && n < len(buf) {
				return parseOOMKill(buf[:n])
			}
			break // unreadable, or longer than expected: read it whole
		}
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

// close closes the kept file, if any.
func (c oomCounter) close() {
	if c.f != nil {
		c.f.Close()
	}
}
