package agent

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// A workload that runs out of memory must not take the sandbox's control
// channel with it. When a memory cgroup is over its limit the kernel kills
// the process with the highest oom_score: its memory plus oom_score_adj
// scaled to the cgroup's size, so a process at 1000 is always chosen before
// one at a lower value. Every process the agent starts therefore begins
// life above the agent: a job's command (and all it forks) at
// workloadOOMScoreAdj, a job shim at shimOOMScoreAdj, between the two, and
// the agent itself keeps the value the runtime gave the container.
//
// Raising oom_score_adj needs no privilege; lowering it needs
// CAP_SYS_RESOURCE, except down to oom_score_adj_min, the value a
// privileged writer (the runtime, for the container's init) last set. So
// the process that starts a child raises itself just before the fork and
// lowers itself back to where it was just after: the child inherits the
// raised value before it runs any code, and its parent spends only the
// fork above its own value (longer only if the host preempts it there;
// meanwhile it competes with workloads on size alone). Writing the child's
// value after the fork would leave the child, and whatever it forks first,
// below it instead; a re-exec that sets the value costs a process start on
// every exec. runc sets the container's value, and with it
// oom_score_adj_min, for the agent; gVisor keeps the value but checks no
// privilege, and its memory limit is the whole sandbox's (docs/security.md).
const (
	workloadOOMScoreAdj = 1000
	shimOOMScoreAdj     = 500
)

// oomScoreAdjPath is this process's oom_score_adj file.
const oomScoreAdjPath = "/proc/self/oom_score_adj"

// oomScoreAdj raises this process's oom_score_adj around the start of a
// child. Its methods are not safe for concurrent use: the caller
// serialises the forks it wraps. A nil *oomScoreAdj starts children
// unchanged.
type oomScoreAdj struct {
	f    *os.File // kept open: one pwrite per change
	own  int      // this process's value, restored after each fork
	warn func(error)
}

// openOOMScoreAdj opens path (oomScoreAdjPath) and reads the process's
// current value; warn receives the errors of later changes, which do not
// stop a child from starting.
func openOOMScoreAdj(path string, warn func(error)) (*oomScoreAdj, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 16)
	n, err := syscall.Pread(int(f.Fd()), buf, 0)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	own, err := strconv.Atoi(string(bytes.TrimSpace(buf[:n])))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return &oomScoreAdj{f: f, own: own, warn: warn}, nil
}

// set writes v as this process's value.
func (a *oomScoreAdj) set(v int) error {
	if _, err := syscall.Pwrite(int(a.f.Fd()), strconv.AppendInt(nil, int64(v), 10), 0); err != nil {
		return fmt.Errorf("set %s to %d: %w", oomScoreAdjPath, v, err)
	}
	return nil
}

// fork runs start, which forks one child, with this process's value raised
// to child (never lowered: a child below its parent needs a privilege the
// sandbox lacks) and then put back. A failure to change the value goes to
// warn; the child starts all the same.
func (a *oomScoreAdj) fork(child int, start func() (int, error)) (int, error) {
	if a == nil || child <= a.own {
		return start()
	}
	if err := a.set(child); err != nil {
		a.warn(err)
		return start()
	}
	pid, err := start()
	if err := a.set(a.own); err != nil {
		a.warn(err)
	}
	return pid, err
}

// close closes the file; a nil *oomScoreAdj is fine.
func (a *oomScoreAdj) close() {
	if a != nil {
		a.f.Close()
	}
}
