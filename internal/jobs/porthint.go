package jobs

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"genesis.dev/sandbox/internal/sandbox"
)

// endedKept is how many ended background jobs per sandbox PortHint looks
// through.
const endedKept = 16

// endedJob is a background job that ended, as PortHint tells of it.
type endedJob struct {
	id       string
	command  string // argv joined, or the script
	finished time.Time
	reason   sandbox.ExitReason
}

// rememberEnded keeps j, a background job that just ended, among the last
// endedKept of its sandbox. Only this process's memory: it costs no store
// read, and after a restart PortHint just knows less.
func (s *Manager) rememberEnded(j *sandbox.Job) {
	if j.Mode != sandbox.JobModeBackground || j.FinishedAt == nil {
		return
	}
	cmd := j.Script
	if len(j.Command) > 0 {
		cmd = strings.Join(j.Command, " ")
	}
	s.endedMu.Lock()
	defer s.endedMu.Unlock()
	list := append(s.ended[j.SandboxID], endedJob{id: j.ID, command: cmd, finished: *j.FinishedAt, reason: j.ExitReason})
	if len(list) > endedKept {
		list = slices.Delete(list, 0, len(list)-endedKept)
	}
	s.ended[j.SandboxID] = list
}

// endedKeptFor is how long PortHint remembers a sandbox's ended jobs
// after the last of them ended (a sandbox's jobs are forgotten at once when
// it ends; this bounds what a job ending just after that leaves).
const endedKeptFor = 24 * time.Hour

// expireEnded forgets the sandboxes whose last remembered job ended before
// cutoff.
func (s *Manager) expireEnded(cutoff time.Time) {
	s.endedMu.Lock()
	defer s.endedMu.Unlock()
	for id, list := range s.ended {
		if list[len(list)-1].finished.Before(cutoff) {
			delete(s.ended, id)
		}
	}
}

// forgetEnded drops what rememberEnded kept of a sandbox.
func (s *Manager) forgetEnded(sandboxID string) {
	s.endedMu.Lock()
	delete(s.ended, sandboxID)
	s.endedMu.Unlock()
}

// PortHint tells, for a port of a sandbox that nobody listens on, of the
// latest background job of that sandbox which ended and whose command
// names the port (python3 -m http.server 8000): its id, command, end and
// exit reason. It answers "" when it knows of none (ports.Config.PortHint).
func (s *Manager) PortHint(sandboxID string, port int) string {
	want := strconv.Itoa(port)
	s.endedMu.Lock()
	list := slices.Clone(s.ended[sandboxID])
	s.endedMu.Unlock()
	for _, j := range slices.Backward(list) {
		if !slices.Contains(strings.FieldsFunc(j.command, func(r rune) bool { return !unicode.IsDigit(r) }), want) {
			continue
		}
		cmd := j.command
		if len(cmd) > 80 {
			cmd = cmd[:77] + "..."
		}
		return fmt.Sprintf("the background job %s (%s) that names this port exited at %s (exit_reason %s)",
			j.id, cmd, j.finished.UTC().Format(time.RFC3339), j.reason)
	}
	return ""
}
