package joblog

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// Store holds the logs of all jobs under one directory.
type Store struct {
	dir string

	mu   sync.Mutex
	logs map[string]*Log // open logs (being written or followed)
}

// Open returns a Store rooted at dir (created if missing).
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("joblog: %w", err)
	}
	return &Store{dir: dir, logs: map[string]*Log{}}, nil
}

func (s *Store) path(jobID string) string { return filepath.Join(s.dir, jobID+".log") }

// Log is one job's log. Appends are serialized; readers may run concurrently.
type Log struct {
	path string

	mu      sync.Mutex
	f       *os.File // append handle, nil when opened read-only
	size    int64
	stdout  int64 // next stdout offset
	stderr  int64
	exited  bool
	exit    []byte        // payload of the exit frame, once appended
	changed chan struct{} // closed and replaced on every append
}

// Get opens (or returns the already open) log of jobID, creating the file if
// create is set. On open it scans the file, drops a torn final frame left by
// a crash, and recovers the stream offsets.
func (s *Store) Get(jobID string, create bool) (*Log, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.logs[jobID]; ok {
		return l, nil
	}
	p := s.path(jobID)
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(p, flags, 0o600)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("log of job %s: %w", jobID, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("joblog: %w", err)
	}
	l := &Log{path: p, f: f, changed: make(chan struct{})}
	if err := l.recover(); err != nil {
		f.Close()
		return nil, err
	}
	s.logs[jobID] = l
	return l, nil
}

// Release closes the append handle of a finished job's log and forgets it.
func (s *Store) Release(jobID string) {
	s.mu.Lock()
	l, ok := s.logs[jobID]
	delete(s.logs, jobID)
	s.mu.Unlock()
	if ok {
		l.mu.Lock()
		if l.f != nil {
			l.f.Close()
			l.f = nil
		}
		l.mu.Unlock()
	}
}

// Remove deletes a job's log file.
func (s *Store) Remove(jobID string) error {
	s.Release(jobID)
	err := os.Remove(s.path(jobID))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// recover scans the frame headers (payloads are skipped, except the exit
// frame's), so opening a large log costs one read per frame, not per byte.
// A torn or corrupt tail (a crash mid-append) is cut off.
func (l *Log) recover() error {
	info, err := l.f.Stat()
	if err != nil {
		return fmt.Errorf("joblog: %w", err)
	}
	end := info.Size()
	var off int64
	var h [agentproto.FrameHeaderSize]byte
	for off < end {
		if end-off < agentproto.FrameHeaderSize {
			break
		}
		if _, err := l.f.ReadAt(h[:], off); err != nil {
			return fmt.Errorf("joblog: reading %s: %w", l.path, err)
		}
		t, n, so, err := agentproto.ParseFrameHeader(h[:])
		if err != nil || off+agentproto.FrameHeaderSize+int64(n) > end {
			break
		}
		fr := agentproto.Frame{Type: t, Offset: so}
		if t == agentproto.FrameExit {
			fr.Payload = make([]byte, n)
			if _, err := l.f.ReadAt(fr.Payload, off+agentproto.FrameHeaderSize); err != nil {
				return fmt.Errorf("joblog: reading %s: %w", l.path, err)
			}
		}
		l.applyLen(fr, int64(n))
		off += agentproto.FrameHeaderSize + int64(n)
	}
	if off != end {
		if err := l.f.Truncate(off); err != nil {
			return fmt.Errorf("joblog: truncating torn tail: %w", err)
		}
	}
	l.size = off
	_, err = l.f.Seek(off, io.SeekStart)
	return err
}

// applyLen is apply for a frame whose payload may not have been read.
func (l *Log) applyLen(fr agentproto.Frame, n int64) {
	switch fr.Type {
	case agentproto.FrameStdout:
		l.stdout = fr.Offset + n
	case agentproto.FrameStderr:
		l.stderr = fr.Offset + n
	default:
		l.apply(fr)
	}
}

func (l *Log) apply(fr agentproto.Frame) {
	switch fr.Type {
	case agentproto.FrameStdout:
		l.stdout = fr.Offset + int64(len(fr.Payload))
	case agentproto.FrameStderr:
		l.stderr = fr.Offset + int64(len(fr.Payload))
	case agentproto.FrameExit:
		l.exited = true
		l.exit = append([]byte(nil), fr.Payload...)
	}
}

// ExitPayload returns the payload of the exit frame (the agent's ExitResult
// JSON), or nil while the job has not ended.
func (l *Log) ExitPayload() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.exit
}

// Offsets returns the next stdout and stderr offsets the log expects (where
// a resumed agent stream must start) and whether the exit frame is in.
func (l *Log) Offsets() (stdout, stderr int64, exited bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stdout, l.stderr, l.exited
}

// Size returns the log's size: the cursor after the last frame.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.size
}

// Append writes frames and wakes followers. Output frames must continue the
// stream exactly where the log ends (a duplicate or overlapping prefix is
// trimmed; a gap is an error), so a resumed agent stream can never create
// duplicates. Nothing is appended after the exit frame.
func (l *Log) Append(frames ...agentproto.Frame) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return fmt.Errorf("joblog: %s is closed: %w", l.path, errdefs.ErrFailedPrecondition)
	}
	var b []byte
	for _, fr := range frames {
		if l.exited {
			break
		}
		switch fr.Type {
		case agentproto.FrameStdout, agentproto.FrameStderr:
			next := &l.stdout
			if fr.Type == agentproto.FrameStderr {
				next = &l.stderr
			}
			if fr.Offset > *next {
				return fmt.Errorf("joblog: gap in stream %d: have %d, frame starts at %d: %w", fr.Type, *next, fr.Offset, errdefs.ErrInternal)
			}
			skip := *next - fr.Offset
			if skip >= int64(len(fr.Payload)) {
				continue // already have all of it
			}
			fr = agentproto.Frame{Type: fr.Type, Offset: *next, Payload: fr.Payload[skip:]}
		}
		b = agentproto.AppendFrame(b, fr)
		l.apply(fr)
	}
	if len(b) == 0 {
		return nil
	}
	if _, err := l.f.Write(b); err != nil {
		return fmt.Errorf("joblog: %w", err)
	}
	l.size += int64(len(b))
	close(l.changed)
	l.changed = make(chan struct{})
	return nil
}

// Event is one frame read back with the cursor that follows it.
type Event struct {
	agentproto.Frame
	Cursor int64 // resume here to get the next event
}

// Exit decodes the payload of an exit frame.
func (e Event) Exit() (agentproto.ExitResult, error) {
	var x agentproto.ExitResult
	err := json.Unmarshal(e.Payload, &x)
	return x, err
}

// ValidCursor reports whether cursor is a frame boundary of the log.
func (l *Log) ValidCursor(cursor int64) (bool, error) {
	size := l.Size()
	if cursor < 0 {
		return false, nil
	}
	if cursor >= size {
		return true, nil // at or beyond the end: the reader waits (follow) or ends
	}
	f, err := os.Open(l.path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	var off int64
	var h [agentproto.FrameHeaderSize]byte
	for off < cursor {
		if _, err := f.ReadAt(h[:], off); err != nil {
			return false, err
		}
		n := int64(h[4])<<24 | int64(h[5])<<16 | int64(h[6])<<8 | int64(h[7])
		off += agentproto.FrameHeaderSize + n
	}
	return off == cursor, nil
}

// Read calls fn for each event from cursor on. With follow it waits for new
// frames until the exit frame has been delivered or ctx ends; without it
// returns at the current end. A cursor beyond the end waits (follow) or
// returns at once.
func (l *Log) Read(ctx context.Context, cursor int64, follow bool, fn func(Event) error) error {
	f, err := os.Open(l.path)
	if err != nil {
		return fmt.Errorf("joblog: %w", err)
	}
	defer f.Close()
	var buf []byte
	for {
		l.mu.Lock()
		size, changed, exited := l.size, l.changed, l.exited
		l.mu.Unlock()
		if cursor < size {
			if _, err := f.Seek(cursor, io.SeekStart); err != nil {
				return err
			}
			r := bufio.NewReaderSize(io.LimitReader(f, size-cursor), 256<<10)
			for cursor < size {
				fr, b, err := agentproto.ReadFrame(r, buf)
				buf = b
				if err != nil {
					return fmt.Errorf("joblog: reading %s at %d: %w", l.path, cursor, err)
				}
				cursor += int64(agentproto.FrameHeaderSize + len(fr.Payload))
				if err := fn(Event{Frame: fr, Cursor: cursor}); err != nil {
					return err
				}
				if fr.Type == agentproto.FrameExit {
					return nil
				}
			}
			continue
		}
		if !follow || exited {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// Wait returns a channel closed at the next append (for keepalive loops).
func (l *Log) Wait() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

// Expired lists the jobs whose log file was last written before cutoff and
// is not open (being written or followed) now.
func (s *Store) Expired(cutoff time.Time) []string {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || s.logs[id] != nil {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
			out = append(out, id)
		}
	}
	return out
}
