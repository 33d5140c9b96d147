package agent

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// Saves of the whole sandbox (gVisor's checkpoint). A bound host Unix
// socket cannot be saved, so around a save the agent serves nobody: it
// answers the prepare request, closes its listener and every connection,
// removes its socket, and waits for the save on /proc/gvisor/checkpoint,
// which it opened before closing (so the next save is the one it waits
// for). The save's end — "resume" (the sandbox ran on), "restore" (this is
// a new container restored from the image) or "error" — or the prepare
// request's deadline ends the wait, and it listens again on the same path.

// checkpointFile is gVisor's file that a reader blocks on until the next
// save of the sandbox is done.
const checkpointFile = "/proc/gvisor/checkpoint"

// maxCheckpointWait bounds how long the agent stays closed for a save.
const maxCheckpointWait = 60 * time.Second

// quiesceOrder asks Run to stop serving until done is closed.
type quiesceOrder struct {
	done <-chan struct{}
}

// checkpointState is what the agent knows of the saves it lived through.
type checkpointState struct {
	mu         sync.Mutex
	generation int
	// quiesce carries an accepted prepare request to Run.
	quiesce chan quiesceOrder
}

func (s *Server) handleCheckpointPrepare(w http.ResponseWriter, r *http.Request) {
	var req agentproto.CheckpointPrepare
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
		writeError(w, fmt.Errorf("checkpoint prepare: %v: %w", err, errdefs.ErrInvalidArgument))
		return
	}
	wait := time.Duration(req.TimeoutMS) * time.Millisecond
	if wait <= 0 || wait > maxCheckpointWait {
		wait = maxCheckpointWait
	}
	if s.cfg.SocketPath == "" {
		writeError(w, errdefs.WithCode(agentproto.CodeCheckpointUnsupported,
			fmt.Errorf("the agent serves TCP, not a host socket: its sandbox is not saved this way: %w", errdefs.ErrNotImplemented)))
		return
	}
	f, err := os.Open(s.cfg.CheckpointFile)
	if err != nil {
		writeError(w, errdefs.WithCode(agentproto.CodeCheckpointUnsupported,
			fmt.Errorf("open %s: %v (not under gVisor?): %w", s.cfg.CheckpointFile, err, errdefs.ErrNotImplemented)))
		return
	}
	done := make(chan struct{})
	select {
	case s.ckpt.quiesce <- quiesceOrder{done: done}:
	default:
		f.Close()
		writeError(w, errdefs.WithCode("checkpoint_in_progress", fmt.Errorf("a save is being prepared already: %w", errdefs.ErrConflict)))
		return
	}
	s.ckpt.mu.Lock()
	gen := s.ckpt.generation
	s.ckpt.mu.Unlock()
	writeJSON(w, http.StatusOK, agentproto.CheckpointPrepared{Generation: gen})
	go s.awaitSave(f, wait, done)
}

// awaitSave reads f (the checkpoint file) until a save is done or wait
// passes, then lets Run listen again; after a restore it takes the new
// container's identity.
func (s *Server) awaitSave(f *os.File, wait time.Duration, done chan<- struct{}) {
	result := make(chan string, 1)
	go func() {
		defer f.Close()
		b := make([]byte, 64)
		n, err := f.Read(b)
		if err != nil {
			result <- "error"
			return
		}
		result <- strings.TrimSpace(string(b[:n]))
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	trigger := filepath.Join(filepath.Dir(s.cfg.SocketPath), agentproto.ResumeFile)
	os.Remove(trigger) // one left by an earlier save says nothing of this one
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	var res string
wait:
	for {
		select {
		case res = <-result:
			break wait
		case <-poll.C:
			if _, err := os.Stat(trigger); err == nil {
				os.Remove(trigger)
				res = "resume"
				break wait
			}
		case <-timer.C:
			break wait
		}
	}
	switch {
	case res != "":
		s.ckpt.mu.Lock()
		if res == "resume" || res == "restore" {
			s.ckpt.generation++
		}
		s.ckpt.mu.Unlock()
		s.log.Info("checkpoint done", "result", res)
		if res == "restore" {
			// A restore brings back the saved process, flag included;
			// set it again all the same, before anyone is served.
			if err := makeUndumpable(); err != nil {
				s.log.Error("restored agent", "err", err)
			}
			s.takeIdentity(true)
		}
	default:
		s.log.Warn("no checkpoint came; serving again", "waited", wait)
	}
	close(done)
}

// takeIdentity reads the sandbox's identity from the container's spec
// (after a restore, the new container's: /proc/gvisor/spec_environ) and
// writes it to the identity file with a fresh seed: the workload of each
// copy of a fork reads a different one.
func (s *Server) takeIdentity(restored bool) {
	env := s.cfg.Environ
	if restored {
		if b, err := os.ReadFile(s.cfg.SpecEnvironFile); err == nil && len(b) > 0 {
			env = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		} else {
			s.log.Warn("no new identity after a restore", "file", s.cfg.SpecEnvironFile, "err", err)
		}
	}
	if s.cfg.IdentityFile == "" {
		return
	}
	var seed [16]byte
	_, _ = rand.Read(seed[:])
	var b bytes.Buffer
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == agentproto.EnvSandboxID {
			b.WriteString(kv + "\n")
		}
	}
	fmt.Fprintf(&b, "%s=%s\nGENESIS_RESTORED=%v\n", agentproto.EnvSeed, hex.EncodeToString(seed[:]), restored)
	s.idMu.Lock()
	s.identity = bytes.Clone(b.Bytes())
	s.idMu.Unlock()
	if err := writeIdentity(s.cfg.IdentityFile, b.Bytes()); err != nil {
		s.log.Warn("identity file", "err", err)
	}
}
