package agent

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"

	"golang.org/x/sys/unix"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// Terminals: a process started on a new pseudo-terminal as the leader of its
// own session (the tty is its controlling terminal), under a shim like a
// background job (shim.go): when it exits, or is deleted, its whole tree
// goes, including processes that left its session. Output is read from the master side into a ring of
// the last agentproto.TerminalBufferBytes; attached clients follow the ring
// by offset, so a slow client never blocks the process or other clients (it
// skips ahead instead). The process keeps running when clients go away.
const (
	maxTerminalIDLen     = 128
	maxRunningTerminals  = 64
	maxFinishedTerminals = 32
	// terminalDrain bounds how long output is still read after the process
	// exited, when a descendant keeps the tty open.
	terminalDrain = 250 * time.Millisecond
	// terminalKillWait bounds how long DELETE waits for a killed process.
	terminalKillWait = 5 * time.Second
	// terminalRead is the size of one read from the master.
	terminalRead = 32 << 10
)

// terminal is one process on a pseudo-terminal.
type terminal struct {
	id      string
	argv    []string
	pid     int
	started time.Time
	master  *os.File
	done    chan struct{} // closed once exit is set

	mu       sync.Mutex
	ring     []byte // len TerminalBufferBytes; byte at offset o is ring[o%len]
	total    int64  // bytes ever produced
	cols     int
	rows     int
	changed  chan struct{} // closed and replaced on every change
	exit     *agentproto.ExitResult
	sentKill bool
	ctl      *os.File // control socket to the shim; nil once the terminal ended
	shimPID  int
	sentCtl  bool // a control byte went to the shim: it is not reused
}

func newTerminal(id string, argv []string, cols, rows int, now time.Time) *terminal {
	return &terminal{
		id: id, argv: argv, started: now, cols: cols, rows: rows,
		ring:    make([]byte, agentproto.TerminalBufferBytes),
		changed: make(chan struct{}),
		done:    make(chan struct{}),
	}
}

// info is the terminal's TerminalInfo now.
func (t *terminal) info() agentproto.TerminalInfo {
	t.mu.Lock()
	defer t.mu.Unlock()
	in := agentproto.TerminalInfo{
		ID: t.id, Command: t.argv, PID: t.pid, Cols: t.cols, Rows: t.rows,
		Running: t.exit == nil, OutputBytes: t.total, KeptFrom: t.keptFromLocked(),
	}
	if t.exit != nil {
		x := *t.exit
		in.Exit = &x
	}
	return in
}

func (t *terminal) keptFromLocked() int64 { return max(0, t.total-int64(len(t.ring))) }

// wakeLocked tells every follower that something changed.
func (t *terminal) wakeLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// write appends output to the ring.
func (t *terminal) write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.ring)
	if len(p) > n {
		t.total += int64(len(p) - n)
		p = p[len(p)-n:]
	}
	for len(p) > 0 {
		i := int(t.total % int64(n))
		c := copy(t.ring[i:], p)
		p = p[c:]
		t.total += int64(c)
	}
	t.wakeLocked()
}

// read appends to b up to max bytes of output from offset off (moved up to
// the oldest kept byte). It returns the offset of the first byte appended,
// the new b, the channel that is closed at the next change, and whether the
// terminal has ended (all its output is in the ring).
func (t *terminal) read(b []byte, off int64, limit int) (int64, []byte, <-chan struct{}, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	off = max(off, t.keptFromLocked())
	from := off
	n := int(min(t.total-off, int64(limit)))
	for n > 0 {
		i := int(off % int64(len(t.ring)))
		chunk := t.ring[i:min(len(t.ring), i+n)]
		b = append(b, chunk...)
		n -= len(chunk)
		off += int64(len(chunk))
	}
	return from, b, t.changed, t.exit != nil
}

// end returns the current output offset.
func (t *terminal) end() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.total
}

// resize sets the window size; the kernel sends SIGWINCH to the foreground
// process group when it changes.
func (t *terminal) resize(cols, rows int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.exit != nil || t.master == nil {
		return errdefs.WithCode("terminal_not_running", fmt.Errorf("terminal %s is not running: %w", t.id, errdefs.ErrFailedPrecondition))
	}
	if err := setWinsize(t.master, cols, rows); err != nil {
		return fmt.Errorf("terminal %s: resize: %v: %w", t.id, err, errdefs.ErrInternal)
	}
	t.cols, t.rows = cols, rows
	return nil
}

// kill SIGKILLs the terminal's process group (the session leader's group).
func (t *terminal) kill() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.exit != nil {
		return
	}
	t.sentKill = true
	t.killLocked()
}

// killLocked SIGKILLs the terminal's group and asks its shim to kill the
// rest of the tree. Called with mu held; before the process started it does
// nothing, and startTerminal calls it once the process runs.
func (t *terminal) killLocked() {
	if t.pid > 0 {
		syscall.Kill(-t.pid, syscall.SIGKILL)
	}
	if t.ctl != nil { // the rest of the tree, through the shim
		t.sentCtl = true
		t.ctl.SetWriteDeadline(time.Now().Add(time.Second))
		t.ctl.Write([]byte{shimCmdKill}) // EPIPE: the shim is exiting anyway
		syscall.Kill(t.shimPID, syscall.SIGCONT)
	}
}

// hangup sends SIGHUP to the terminal's process group, as a terminal hangup
// would (an interactive shell ignores SIGTERM but not SIGHUP).
func (t *terminal) hangup() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.exit == nil && t.pid > 0 {
		syscall.Kill(-t.pid, syscall.SIGHUP)
	}
}

// pump reads the master into the ring until the process has exited and its
// output is drained, then records the exit, kills what is left of the
// process group, hangs the terminal up and closes the master.
func (t *terminal) pump(s *Server, sp *spareShim, st *shimStatus) {
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, terminalRead)
		for {
			n, err := t.master.Read(buf)
			if n > 0 {
				t.write(buf[:n])
			}
			if err != nil {
				// EIO once no process has the tty open any more; a
				// deadline error after the drain time.
				return
			}
		}
	}()
	ws, at, _ := awaitShim(sp, st)
	// The shim killed the rest of the tree; if it died, the group is what
	// can still be reached.
	syscall.Kill(-t.pid, syscall.SIGKILL)
	select {
	case <-readDone:
	case <-time.After(terminalDrain):
		t.master.SetReadDeadline(time.Now())
		<-readDone
	}
	t.mu.Lock()
	code, reason, sig := s.classifyExit(ws, t.sentKill, 0, false)
	t.master.Close()
	t.exit = &agentproto.ExitResult{
		ExitCode: code, ExitReason: reason, Signal: sig,
		StdoutBytes: t.total, DurationMS: at.Sub(t.started).Milliseconds(),
	}
	reuse := !t.sentCtl
	t.ctl = nil
	close(t.done)
	t.wakeLocked()
	t.mu.Unlock()
	s.releaseShim(sp, st, reuse)
	s.terms.finished(t)
}

// fail ends a terminal whose process could not be started, so that
// followers that found it meanwhile see an exit.
func (t *terminal) fail() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.exit = &agentproto.ExitResult{ExitCode: 127, ExitReason: agentproto.ExitReasonExited}
	close(t.done)
	t.wakeLocked()
}

// setWinsize sets a tty's window size without putting f in blocking mode
// (which os.File.Fd would).
func setWinsize(f *os.File, cols, rows int) error {
	ws := unix.Winsize{Col: uint16(cols), Row: uint16(rows)}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) { ierr = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &ws) }); err != nil {
		return err
	}
	return ierr
}

// openPTY opens a new pseudo-terminal. The master is returned in
// non-blocking mode, registered with the runtime poller, so reads can be
// interrupted by deadlines and Close; pty.Open leaves it blocking.
func openPTY() (master, tty *os.File, err error) {
	m, tty, err := pty.Open()
	if err != nil {
		return nil, nil, err
	}
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	m.Close()
	if err != nil {
		tty.Close()
		return nil, nil, fmt.Errorf("dup pty master: %w", err)
	}
	if err := syscall.SetNonblock(int(fd), true); err != nil {
		syscall.Close(int(fd))
		tty.Close()
		return nil, nil, fmt.Errorf("pty master non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), tty, nil
}

// defaultShell is the user's shell: /bin/bash if present, else /bin/sh.
func defaultShell() []string {
	if _, err := checkExecutable("/bin/bash"); err == nil {
		return []string{"/bin/bash"}
	}
	return []string{"/bin/sh"}
}

// validTerminalID reports whether id is 1-128 characters of [A-Za-z0-9._-].
func validTerminalID(id string) bool {
	if id == "" || len(id) > maxTerminalIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validSize checks a window size; 0 means the default when zeroOK.
func validSize(cols, rows int, zeroOK bool) error {
	lo := 1
	if zeroOK {
		lo = 0
	}
	if cols < lo || rows < lo || cols > agentproto.MaxTerminalSize || rows > agentproto.MaxTerminalSize {
		return fmt.Errorf("window size %dx%d: cols and rows must be %d to %d: %w",
			cols, rows, lo, agentproto.MaxTerminalSize, errdefs.ErrInvalidArgument)
	}
	return nil
}

// startTerminal starts req's process on a new pseudo-terminal.
func (s *Server) startTerminal(req *agentproto.TerminalStartRequest) (*terminal, error) {
	if !validTerminalID(req.ID) {
		return nil, errdefs.Invalid("terminal id %q: want 1-%d characters of [A-Za-z0-9._-]", req.ID, maxTerminalIDLen)
	}
	if err := validSize(req.Cols, req.Rows, true); err != nil {
		return nil, err
	}
	cols, rows := req.Cols, req.Rows
	if cols == 0 {
		cols = agentproto.DefaultTerminalCols
	}
	if rows == 0 {
		rows = agentproto.DefaultTerminalRows
	}
	argv := req.Command
	if len(argv) == 0 {
		argv = defaultShell()
	}
	env := req.Env
	if _, ok := env["TERM"]; !ok && s.env.vars["TERM"] == "" {
		env = make(map[string]string, len(req.Env)+1)
		for k, v := range req.Env {
			env[k] = v
		}
		env["TERM"] = "xterm-256color"
	}
	j, re, err := s.prepare(&agentproto.ExecRequest{Command: argv, Cwd: req.Cwd, Env: env})
	if err != nil {
		return nil, err
	}
	if re != nil {
		return nil, errdefs.WithCode("command_not_runnable", fmt.Errorf("terminal %s: %s (exit code %d): %w", req.ID, re.msg, re.code, errdefs.ErrInvalidArgument))
	}

	t := newTerminal(req.ID, slices.Clone(argv), cols, rows, time.Now())
	if err := s.terms.add(t); err != nil {
		return nil, err
	}
	master, tty, err := openPTY()
	if err != nil {
		s.terms.remove(t)
		return nil, fmt.Errorf("terminal %s: open pseudo-terminal: %v: %w", t.id, err, errdefs.ErrUnavailable)
	}
	defer tty.Close() // the child has its own copies; ours would keep the master from seeing EOF
	if err := setWinsize(tty, cols, rows); err != nil {
		master.Close()
		s.terms.remove(t)
		return nil, fmt.Errorf("terminal %s: set window size: %v: %w", t.id, err, errdefs.ErrInternal)
	}
	ss := shimSpecOf(j)
	ss.TTY = true
	sp, err := s.handToShim("terminal "+t.id, ss, [3]*os.File{tty, tty, tty})
	if err != nil {
		master.Close()
		t.fail()
		s.terms.remove(t)
		return nil, err
	}
	st := &shimStatus{started: make(chan struct{}), done: make(chan struct{})}
	go s.readShimStatus("terminal "+t.id, sp.lines, st, func(int) {})
	wait := time.NewTimer(shimStartTimeout)
	defer wait.Stop()
	select {
	case <-st.started:
	case <-st.done:
	case <-wait.C:
	}
	if st.pid == 0 {
		// The command did not start (the shim wrote why into the tty,
		// which nobody reads), or the shim is stuck or gone.
		master.Close()
		t.fail()
		s.terms.remove(t)
		go func() {
			awaitShim(sp, st)
			s.releaseShim(sp, st, true)
		}()
		if st.exited {
			return nil, errdefs.WithCode("command_not_runnable", fmt.Errorf("terminal %s: start %s: exit status %d: %w", t.id, j.argv0, st.ws.ExitStatus(), errdefs.ErrInvalidArgument))
		}
		syscall.Kill(sp.pid, syscall.SIGKILL)
		return nil, fmt.Errorf("terminal %s: the shim did not start %s: %w", t.id, j.argv0, errdefs.ErrUnavailable)
	}
	pid := st.pid
	t.mu.Lock()
	t.pid, t.master, t.ctl, t.shimPID = pid, master, sp.ctl, sp.pid
	if t.sentKill { // deleted while starting
		t.killLocked()
	}
	t.mu.Unlock()
	go t.pump(s, sp, st)
	s.log.Debug("terminal started", "terminal", t.id, "pid", pid, "argv", argv, "cols", cols, "rows", rows)
	return t, nil
}

// deleteTerminal kills a terminal's process group, waits (bounded) for the
// process to exit and forgets the terminal.
func (s *Server) deleteTerminal(t *terminal) {
	t.kill()
	select {
	case <-t.done:
	case <-time.After(terminalKillWait):
		s.log.Warn("terminal process did not exit after SIGKILL", "terminal", t.id, "pid", t.pid)
	}
	s.terms.remove(t)
}

// terminalTable holds the terminals the agent knows. Its zero value is ready.
type terminalTable struct {
	mu    sync.Mutex
	terms map[string]*terminal
	ended []*terminal // in the order they finished, for eviction
}

func (tt *terminalTable) add(t *terminal) error {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.terms == nil {
		tt.terms = make(map[string]*terminal)
	}
	if _, ok := tt.terms[t.id]; ok {
		return errdefs.WithCode("terminal_exists", fmt.Errorf("terminal %s already exists: %w", t.id, errdefs.ErrConflict))
	}
	if len(tt.terms)-len(tt.ended) >= maxRunningTerminals {
		return fmt.Errorf("%d terminals are running, the agent's limit: %w", maxRunningTerminals, errdefs.ErrResourceExhausted)
	}
	tt.terms[t.id] = t
	return nil
}

func (tt *terminalTable) get(id string) (*terminal, error) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	t, ok := tt.terms[id]
	if !ok {
		return nil, errdefs.WithCode("terminal_not_found", fmt.Errorf("terminal %s: %w", id, errdefs.ErrNotFound))
	}
	return t, nil
}

// list returns every terminal, oldest first.
func (tt *terminalTable) list() []*terminal {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	out := make([]*terminal, 0, len(tt.terms))
	for _, t := range tt.terms {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *terminal) int { return a.started.Compare(b.started) })
	return out
}

// remove forgets t (if it is still the terminal registered under its id).
func (tt *terminalTable) remove(t *terminal) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.terms[t.id] == t {
		delete(tt.terms, t.id)
	}
	tt.ended = slices.DeleteFunc(tt.ended, func(f *terminal) bool { return f == t })
}

// finished records that t ended, evicting the oldest finished terminals
// beyond maxFinishedTerminals.
func (tt *terminalTable) finished(t *terminal) {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	if tt.terms[t.id] != t {
		return // deleted already
	}
	tt.ended = append(tt.ended, t)
	for len(tt.ended) > maxFinishedTerminals {
		old := tt.ended[0]
		tt.ended = tt.ended[1:]
		if tt.terms[old.id] == old {
			delete(tt.terms, old.id)
		}
	}
}

// hangupAll sends SIGHUP to every running terminal (agent shutdown).
func (tt *terminalTable) hangupAll() {
	for _, t := range tt.list() {
		t.hangup()
	}
}
