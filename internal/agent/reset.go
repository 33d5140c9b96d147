package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/mountinfo"
)

// A reset prepares a running sandbox for another holder, possibly of
// another tenant: it must leave nothing of the previous one behind, and it
// fails (code reset_incomplete) rather than answer with something left.
//
// Inside a container the agent is the init process: every other process
// in /proc is the previous holder's, and the places to empty are found in
// /proc/self/mountinfo. Run as a host process (tests), it kills only its own
// descendants (orphans are reparented to it, a child subreaper) and empties
// only Config.ResetDirs; without them it refuses.

const (
	// resetJobsWait bounds the wait for killed background jobs to end; it
	// covers a shim's own hard-kill fallback.
	resetJobsWait = hardKillAfter + 2*time.Second
	// resetProcsWait bounds the sweep of the remaining processes.
	resetProcsWait = 10 * time.Second
	// resetReport is how many leftovers an error names.
	resetReport = 8
)

// codeResetIncomplete is the problem code of a reset that left something.
const codeResetIncomplete = "reset_incomplete"

func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	res, err := s.reset()
	if err != nil {
		s.log.Warn("reset failed", "err", err)
		writeError(w, err)
		return
	}
	s.log.Info("reset", "killed", res.Killed, "jobs", res.JobsDropped, "terminals", res.TerminalsDropped,
		"removed", res.Removed, "ms", res.DurationMS)
	writeJSON(w, http.StatusOK, res)
}

// reset kills every process but the agent, forgets jobs and terminals, and
// empties every writable place. Resets do not overlap.
func (s *Server) reset() (agentproto.ResetResult, error) {
	s.resetMu.Lock()
	defer s.resetMu.Unlock()
	start := time.Now()
	var res agentproto.ResetResult
	uid := os.Getuid()
	if uid == 0 {
		return res, errdefs.WithCode("reset_unsupported", fmt.Errorf(
			"the agent runs as root, so a reset cannot vouch that nothing was left: %w", errdefs.ErrFailedPrecondition))
	}
	asInit := os.Getpid() == 1
	if !asInit && s.cfg.ResetDirs == nil {
		return res, errdefs.WithCode("reset_unsupported", fmt.Errorf(
			"the agent is not the sandbox's init and has no reset directories: %w", errdefs.ErrFailedPrecondition))
	}

	// The idle spare shims are retired too: nothing the previous holder
	// could reach survives. A new one starts once the reset is done
	// (primeAfterReset).
	s.retireSpares()

	for _, t := range s.terms.list() {
		s.deleteTerminal(t)
		res.TerminalsDropped++
	}
	killed, err := s.resetJobs()
	res.Killed += killed
	if err != nil {
		return res, err
	}
	for _, j := range s.jobs.list() {
		if s.jobs.forget(j.id) == nil {
			res.JobsDropped++
		}
	}
	n, err := s.sweepProcs(asInit)
	res.Killed += n
	if err != nil {
		return res, err
	}
	if asInit {
		if err := checkIPC(); err != nil {
			return res, err
		}
	}

	var mounts []mountinfo.Mount
	places := s.cfg.ResetDirs
	if asInit {
		if mounts, err = mountinfo.ReadMounts(); err != nil {
			return res, fmt.Errorf("reset: read the mounts: %v: %w", err, errdefs.ErrInternal)
		}
		places = resetPlaces(mounts, s.cfg.DefaultWorkdir, s.env.vars["HOME"], filepath.Dir(s.cfg.SocketPath))
	}
	w := &wiper{uid: uid, gid: os.Getgid(), mountPoints: map[string]bool{}}
	for _, m := range mounts {
		w.mountPoints[m.Point] = true
	}
	for _, p := range places {
		fi, err := os.Lstat(p)
		if err != nil || !fi.IsDir() {
			continue // not in this image
		}
		w.empty(p)
		res.Emptied = append(res.Emptied, p)
	}
	s.resetSocketDir(w, asInit)
	if i := slices.IndexFunc(mounts, func(m mountinfo.Mount) bool { return m.Point == "/" }); i >= 0 && mounts[i].ReadWrite {
		s.rootDirs = w.scanRoot(s.rootDirs)
		res.RootScanned = true
	}
	for _, p := range res.Emptied {
		w.checkEmpty(p)
	}
	res.Removed = w.removed
	res.DurationMS = time.Since(start).Milliseconds()
	if len(w.left) > 0 {
		return res, errdefs.WithCode(codeResetIncomplete, fmt.Errorf("reset left %d entries behind: %s: %w",
			len(w.left), strings.Join(w.left[:min(len(w.left), resetReport)], "; "), errdefs.ErrInternal))
	}
	s.primeAfterReset()
	return res, nil
}

// resetJobs kills every running background job's tree through its shim and
// waits until all have ended.
func (s *Server) resetJobs() (int, error) {
	running := s.jobs.running()
	if len(running) == 0 {
		return 0, nil
	}
	s.jobs.killAll()
	deadline := time.Now().Add(resetJobsWait)
	for len(s.jobs.running()) > 0 {
		if time.Now().After(deadline) {
			return len(running), errdefs.WithCode(codeResetIncomplete, fmt.Errorf(
				"%d background jobs still run %v after SIGKILL: %w", len(s.jobs.running()), resetJobsWait, errdefs.ErrInternal))
		}
		time.Sleep(5 * time.Millisecond)
	}
	return len(running), nil
}

// sweepProcs SIGKILLs every process other than the agent (as init) or every
// descendant of it (as a host process) until none is left, zombies
// included: the supervisor reaps those.
func (s *Server) sweepProcs(asInit bool) (int, error) {
	scan := newProcScanner("/proc")
	self := os.Getpid()
	killed := map[int]bool{}
	deadline := time.Now().Add(resetProcsWait)
	for {
		var procs []procEntry
		var err error
		if asInit {
			procs, err = scan.scan()
			procs = slices.DeleteFunc(procs, func(p procEntry) bool { return p.pid == self })
		} else {
			procs, err = scan.descendants(self)
		}
		if err != nil {
			return len(killed), fmt.Errorf("reset: list processes: %v: %w", err, errdefs.ErrInternal)
		}
		if len(procs) == 0 {
			return len(killed), nil
		}
		if time.Now().After(deadline) {
			pids := make([]string, 0, resetReport)
			for _, p := range procs[:min(len(procs), resetReport)] {
				pids = append(pids, fmt.Sprintf("%d(%c)", p.pid, p.state))
			}
			return len(killed), errdefs.WithCode(codeResetIncomplete, fmt.Errorf(
				"%d processes survive SIGKILL after %v: %s: %w", len(procs), resetProcsWait, strings.Join(pids, " "), errdefs.ErrInternal))
		}
		for _, p := range procs {
			if p.zombie() {
				continue
			}
			if err := syscall.Kill(p.pid, syscall.SIGKILL); err == nil {
				killed[p.pid] = true
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// resetSkipFS are file systems with nothing a holder can leave in them
// (or nothing a reset may touch).
var resetSkipFS = []string{"proc", "sysfs", "cgroup", "cgroup2", "devpts", "securityfs", "debugfs", "tracefs", "bpf"}

// resetPlaces lists the directories a reset empties: the workspace, the
// temporary directories, the home directory, and every other read-write
// mount except the root (scanned instead), /proc, /sys, /dev itself and the
// agent's socket directory (emptied but for the agent's own files:
// socket.go).
func resetPlaces(mounts []mountinfo.Mount, workdir, home, socketDir string) []string {
	places := []string{workdir, "/tmp", "/var/tmp", "/dev/shm"}
	if home != "" && home != "/" {
		places = append(places, home)
	}
	for _, m := range mounts {
		if !m.ReadWrite || m.Point == "/" || m.Point == "/dev" || m.Point == socketDir || slices.Contains(resetSkipFS, m.FSType) ||
			under(m.Point, "/proc") || under(m.Point, "/sys") {
			continue
		}
		places = append(places, m.Point)
	}
	out := places[:0]
	for _, p := range places {
		p = filepath.Clean(p)
		if p != "/" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// under reports whether p is dir or inside it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// wiper removes what the sandbox user left, counting and noting leftovers.
type wiper struct {
	uid, gid    int
	mountPoints map[string]bool
	removed     int
	left        []string
}

func (w *wiper) fail(path string, err error) {
	w.left = append(w.left, fmt.Sprintf("%s: %v", path, err))
}

// empty removes everything inside dir; mount points inside it are left to
// their own entry.
func (w *wiper) empty(dir string) {
	w.own(dir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		w.fail(dir, err)
		return
	}
	for _, e := range ents {
		w.remove(filepath.Join(dir, e.Name()))
	}
}

// own makes a directory of the user's searchable and writable again (the
// holder may have removed its own permissions).
func (w *wiper) own(dir string) {
	var st syscall.Stat_t
	if syscall.Lstat(dir, &st) == nil && int(st.Uid) == w.uid && st.Mode&0o700 != 0o700 {
		os.Chmod(dir, fs.FileMode(st.Mode&0o7777|0o700))
	}
}

// remove deletes path and, for a directory, everything in it.
func (w *wiper) remove(path string) {
	if w.mountPoints[path] {
		return
	}
	fi, err := os.Lstat(path)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			w.fail(path, err)
		}
		return
	}
	if fi.IsDir() {
		w.empty(path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		w.fail(path, err)
		return
	}
	w.removed++
}

// checkEmpty notes anything still inside dir other than mount points.
func (w *wiper) checkEmpty(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		w.fail(dir, err)
		return
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if !w.mountPoints[p] && !slices.ContainsFunc(w.left, func(l string) bool { return strings.HasPrefix(l, p) }) {
			w.fail(p, errors.New("still present"))
		}
	}
}

// scanRoot searches a writable root file system for what the user made:
// every entry it owns inside a directory it can write to is removed. Mount
// points (emptied on their own), /proc, /sys and /dev are not entered.
//
// The first scan walks the whole tree and returns the directories the user
// can write to (or owns) that it kept; later scans look only in those. That
// is enough: a new entry can only appear in a directory the user can write
// to; one the user made is its own and is removed whole; the modes of the
// directories the user does not own cannot change; and the ones it owns are
// listed whatever their mode.
func (w *wiper) scanRoot(cached []string) []string {
	if cached != nil {
		for _, dir := range cached {
			w.sweepDir(dir)
		}
		return cached
	}
	var writable []string
	stack := []string{"/"}
	for len(stack) > 0 {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		var st syscall.Stat_t
		if err := syscall.Lstat(dir, &st); err != nil {
			continue
		}
		if w.canWrite(&st) {
			w.sweepDir(dir)
			writable = append(writable, dir)
		}
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue // not readable by the user: nothing of it inside either
		}
		for _, e := range ents {
			if p := filepath.Join(dir, e.Name()); e.IsDir() && !w.skipRoot(p) {
				stack = append(stack, p)
			}
		}
	}
	return writable
}

// canWrite reports whether the user can add entries to a directory with st.
func (w *wiper) canWrite(st *syscall.Stat_t) bool {
	return int(st.Uid) == w.uid || st.Mode&0o002 != 0 || (int(st.Gid) == w.gid && st.Mode&0o020 != 0)
}

// skipRoot reports whether the root scan leaves p alone.
func (w *wiper) skipRoot(p string) bool {
	return w.mountPoints[p] || p == "/proc" || p == "/sys" || p == "/dev"
}

// sweepDir removes every entry of dir the user owns.
func (w *wiper) sweepDir(dir string) {
	w.own(dir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			w.fail(dir, err)
		}
		return
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if w.skipRoot(p) {
			continue
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err == nil && int(st.Uid) == w.uid {
			w.remove(p)
		}
	}
}

// System V IPC commands that report how many objects exist (<linux/shm.h>,
// <linux/msg.h>, <linux/sem.h>).
const (
	shmInfo = 14 // SHM_INFO: struct shm_info, used_ids first
	msgInfo = 12 // MSG_INFO: struct msginfo, msgpool (queues) first
	semInfo = 19 // SEM_INFO: struct seminfo, semusz (sets) at byte 28
)

// checkIPC fails when System V shared memory segments, message queues or
// semaphore sets exist: they outlive the processes that made them and hold
// data the next holder (the same uid) could open, and gVisor offers no
// /proc/sysvipc to list and remove them by, so such a sandbox is destroyed.
func checkIPC() error {
	buf := new([128]byte) // on the heap, which does not move, so p stays valid
	p := uintptr(unsafe.Pointer(buf))
	count := func(what string, off int, call func() syscall.Errno) (int32, error) {
		clear(buf[:])
		if e := call(); e != 0 {
			return 0, fmt.Errorf("reset: count %s: %v: %w", what, e, errdefs.ErrInternal)
		}
		return *(*int32)(unsafe.Pointer(&buf[off])), nil
	}
	var found []string
	for _, c := range []struct {
		what string
		off  int
		call func() syscall.Errno
	}{
		{"shared memory segments", 0, func() syscall.Errno { _, _, e := syscall.Syscall(syscall.SYS_SHMCTL, 0, shmInfo, p); return e }},
		{"message queues", 0, func() syscall.Errno { _, _, e := syscall.Syscall(syscall.SYS_MSGCTL, 0, msgInfo, p); return e }},
		{"semaphore sets", 28, func() syscall.Errno {
			_, _, e := syscall.Syscall6(syscall.SYS_SEMCTL, 0, 0, semInfo, p, 0, 0)
			return e
		}},
	} {
		n, err := count(c.what, c.off, c.call)
		if err != nil {
			return err
		}
		if n > 0 {
			found = append(found, fmt.Sprintf("%d System V %s", n, c.what))
		}
	}
	if len(found) > 0 {
		return errdefs.WithCode(codeResetIncomplete, fmt.Errorf("reset: the holder left %s: %w", strings.Join(found, ", "), errdefs.ErrInternal))
	}
	return nil
}
