package trace

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"genesis.dev/sandbox/internal/errdefs"
)

// Actors of events. A person is "human:<who>".
const (
	ActorAgent  = "agent"
	ActorAPI    = "api"
	ActorSystem = "system"
)

// HumanActor is the actor of something a person did.
func HumanActor(who string) string { return "human:" + who }

// MaxHumanName bounds the name of a person (the who of "human:<who>"), in
// characters.
const MaxHumanName = 64

// HumanNameRule says which names of a person are valid, for errors.
const HumanNameRule = "1-64 letters, digits, spaces and . - _ @ :, not starting or ending with a space"

// ValidHumanName reports whether who may name a person (in "human:<who>"
// actors, desktop control holders and live-view viewers): letters,
// digits, spaces and . - _ @ : only, 1 to MaxHumanName of them, no space
// at either end. Names are shown in pages and logs; nothing in them can
// be markup or a control character.
func ValidHumanName(who string) bool {
	if who == "" || utf8.RuneCountInString(who) > MaxHumanName || !utf8.ValidString(who) ||
		strings.HasPrefix(who, " ") || strings.HasSuffix(who, " ") {
		return false
	}
	for _, r := range who {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune(".-_@ :", r) {
			return false
		}
	}
	return true
}

// ValidActor reports whether a is one of the actors of an event.
func ValidActor(a string) bool {
	switch a {
	case ActorAgent, ActorAPI, ActorSystem:
		return true
	}
	who, ok := strings.CutPrefix(a, "human:")
	return ok && ValidHumanName(who)
}

// Event is one entry of a trace. Seq and Time are set by Append; Data holds
// the kind's own fields (a JSON object).
type Event struct {
	Seq   int64           `json:"seq"`
	Time  time.Time       `json:"time"`
	Actor string          `json:"actor"`
	Kind  Kind            `json:"kind"`
	Data  json.RawMessage `json:"data,omitempty"`
}

// Recorder is what producers (browser, desktop, jobs, MCP) record through.
// It never fails the producer's operation: a trace that cannot be written
// is logged by the implementation.
type Recorder interface {
	Record(ctx context.Context, tenant, sandboxID string, e Event)
}

// MaxDataBytes bounds the data of one event.
const MaxDataBytes = 64 << 10

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// Config configures a Store.
type Config struct {
	// Dir holds the trace files (created if missing).
	Dir string
	// Retention is how long a trace is kept after its sandbox ended
	// (default 7 days).
	Retention time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Store holds the traces of all sandboxes.
type Store struct {
	dir       string
	retention time.Duration
	now       func() time.Time

	mu    sync.Mutex
	logs  map[string]*log
	gates map[string]*gate // interrupt states of sandboxes not running freely
}

type meta struct {
	Tenant string     `json:"tenant"`
	Ended  *time.Time `json:"ended_at,omitempty"`
}

// log is one open trace.
type log struct {
	mu      sync.Mutex
	f       *os.File
	meta    meta
	offsets []int64 // offsets[i] is where the event of seq i+1 starts
	size    int64
	changed chan struct{}
}

// Open returns a Store for cfg.
func Open(cfg Config) (*Store, error) {
	if cfg.Dir == "" {
		return nil, errdefs.Invalid("trace: no directory")
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 7 * 24 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Store{dir: cfg.Dir, retention: cfg.Retention, now: cfg.Now, logs: map[string]*log{}, gates: map[string]*gate{}}, nil
}

// A sandbox has one trace per tenant that held it (a pooled sandbox is
// held by one tenant after another): its files are named by key.
func key(tenant, id string) string {
	h := sha256.Sum256([]byte(tenant))
	return id + "@" + hex.EncodeToString(h[:8])
}

func (s *Store) path(k string) string { return filepath.Join(s.dir, k+".jsonl") }
func (s *Store) metaPath(k string) string {
	return filepath.Join(s.dir, k+".meta.json")
}

func notFound(id string) error {
	return errdefs.WithCode("trace_not_found", fmt.Errorf("no trace of sandbox %s: %w", id, errdefs.ErrNotFound))
}

// get opens the trace of sandboxID. With create, a missing trace is made
// for tenant; without, a missing trace or one of another tenant is not
// found.
func (s *Store) get(tenant, id string, create bool) (*log, error) {
	if !idRE.MatchString(id) {
		return nil, notFound(id)
	}
	k := key(tenant, id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.logs[k]; ok {
		if l.meta.Tenant != tenant {
			return nil, notFound(id)
		}
		return l, nil
	}
	var m meta
	b, err := os.ReadFile(s.metaPath(k))
	switch {
	case errors.Is(err, os.ErrNotExist):
		if !create {
			return nil, notFound(id)
		}
		m = meta{Tenant: tenant}
		if err := writeMeta(s.metaPath(k), m); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("trace: %w", err)
	default:
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("trace: metadata of %s: %w", id, err)
		}
	}
	if m.Tenant != tenant {
		return nil, notFound(id)
	}
	f, err := os.OpenFile(s.path(k), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	l := &log{f: f, meta: m, changed: make(chan struct{})}
	if err := l.recover(); err != nil {
		f.Close()
		return nil, err
	}
	s.logs[k] = l
	return l, nil
}

func writeMeta(p string, m meta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	return nil
}

// recover indexes the file's events and cuts off a torn or corrupt tail.
func (l *log) recover() error {
	if _, err := l.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	br := bufio.NewReader(l.f)
	var off int64
	for {
		line, err := br.ReadBytes('\n')
		if err != nil { // EOF: a last line without LF is torn
			break
		}
		var e struct {
			Seq int64 `json:"seq"`
		}
		if json.Unmarshal(line, &e) != nil || e.Seq != int64(len(l.offsets))+1 {
			break
		}
		l.offsets = append(l.offsets, off)
		off += int64(len(line))
	}
	if err := l.f.Truncate(off); err != nil {
		return fmt.Errorf("trace: truncating torn tail: %w", err)
	}
	if _, err := l.f.Seek(off, io.SeekStart); err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	l.size = off
	return nil
}

// Append adds e to the trace of sandboxID (made for tenant if it has none),
// setting its seq and time, and returns it.
func (s *Store) Append(ctx context.Context, tenant, sandboxID string, e Event) (Event, error) {
	if !ValidActor(e.Actor) {
		return Event{}, fmt.Errorf("trace: actor %q: %w", e.Actor, errdefs.ErrInvalidArgument)
	}
	if e.Kind == "" {
		return Event{}, errdefs.Invalid("trace: empty kind")
	}
	if len(e.Data) > MaxDataBytes {
		return Event{}, errdefs.Invalid("trace: event data of %d bytes exceeds %d", len(e.Data), MaxDataBytes)
	}
	if len(e.Data) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, e.Data); err != nil || buf.Len() == 0 || buf.Bytes()[0] != '{' {
			return Event{}, errdefs.Invalid("trace: event data must be a JSON object")
		}
		e.Data = buf.Bytes()
	}
	l, err := s.get(tenant, sandboxID, true)
	if err != nil {
		return Event{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.meta.Ended != nil { // the sandbox is back (a stop, then a start)
		m := l.meta
		m.Ended = nil
		if err := writeMeta(s.metaPath(key(tenant, sandboxID)), m); err != nil {
			return Event{}, err
		}
		l.meta = m
	}
	e.Seq = int64(len(l.offsets)) + 1
	e.Time = s.now().UTC()
	line, err := json.Marshal(e)
	if err != nil {
		return Event{}, fmt.Errorf("trace: %w", err)
	}
	line = append(line, '\n')
	if _, err := l.f.Write(line); err != nil {
		// Leave the file as the index says: a partial line is cut off.
		_ = l.f.Truncate(l.size)
		_, _ = l.f.Seek(l.size, io.SeekStart)
		return Event{}, fmt.Errorf("trace: %w", err)
	}
	l.offsets = append(l.offsets, l.size)
	l.size += int64(len(line))
	close(l.changed)
	l.changed = make(chan struct{})
	return e, nil
}

// Record appends e and drops an error: the Recorder of producers. Events
// of nobody's sandbox (a pool member between holders) are not kept: no
// tenant could read them.
func (s *Store) Record(ctx context.Context, tenant, sandboxID string, e Event) {
	if tenant == "" {
		return
	}
	_, _ = s.Append(ctx, tenant, sandboxID, e)
}

// Ensure makes the (empty) trace of sandboxID for tenant if it has none,
// so that a reader can follow it from its start; another tenant's trace is
// not found.
func (s *Store) Ensure(tenant, sandboxID string) error {
	_, err := s.get(tenant, sandboxID, true)
	return err
}

// Name names the store among control's hooks.
func (s *Store) Name() string { return "trace" }

// SandboxEnding marks the sandbox's trace ended (control's hook): it is
// kept for the retention from now. Its interrupt state ends with the
// holder's hold: a pooled sandbox's next holder is not paused.
func (s *Store) SandboxEnding(ctx context.Context, sandboxID, reason string) {
	s.mu.Lock()
	delete(s.gates, sandboxID)
	s.mu.Unlock()
	_ = s.End(sandboxID)
}

// Sweep is control's sweep hook: it removes expired traces (Expire).
func (s *Store) Sweep(ctx context.Context, now time.Time, startup bool) { _, _ = s.Expire(now) }

// Last returns the seq of the newest event of the trace of sandboxID.
func (s *Store) Last(tenant, sandboxID string) (int64, error) {
	l, err := s.get(tenant, sandboxID, false)
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(len(l.offsets)), nil
}

// ErrInvalidCursor classes a cursor that is not an event of the trace.
func invalidCursor(after, last int64, id string) error {
	return errdefs.WithCode("invalid_cursor", fmt.Errorf(
		"cursor %d is not an event of the trace of sandbox %s (0..%d): %w", after, id, last, errdefs.ErrInvalidArgument))
}

// Read returns up to limit events after seq after, and a channel closed on
// the next append (for followers: take it before reading, wait on it when
// the read came back empty). A cursor below 0 or beyond the newest event is
// invalid_cursor.
func (s *Store) Read(tenant, sandboxID string, after int64, limit int) ([]Event, <-chan struct{}, error) {
	l, err := s.get(tenant, sandboxID, false)
	if err != nil {
		return nil, nil, err
	}
	l.mu.Lock()
	n := int64(len(l.offsets))
	changed := l.changed
	if after < 0 || after > n {
		l.mu.Unlock()
		return nil, nil, invalidCursor(after, n, sandboxID)
	}
	if limit <= 0 {
		limit = 1000
	}
	end := min(n, after+int64(limit))
	if end == after {
		l.mu.Unlock()
		return nil, changed, nil
	}
	start, stop := l.offsets[after], l.size
	if end < n {
		stop = l.offsets[end]
	}
	buf := make([]byte, stop-start)
	_, err = l.f.ReadAt(buf, start)
	l.mu.Unlock()
	if err != nil {
		return nil, nil, fmt.Errorf("trace: %w", err)
	}
	out := make([]Event, 0, end-after)
	for line := range bytes.Lines(buf) {
		var e Event
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, nil, fmt.Errorf("trace: event %d: %w", after+int64(len(out))+1, err)
		}
		out = append(out, e)
	}
	return out, changed, nil
}

// End marks the traces of sandboxID (one per tenant that held it) as ended
// now: Expire removes them once the retention has passed. Nothing happens
// when the sandbox has no trace.
func (s *Store) End(sandboxID string) error {
	if !idRE.MatchString(sandboxID) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	metas, err := filepath.Glob(filepath.Join(s.dir, sandboxID+"@*.meta.json"))
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	for _, p := range metas {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("trace: %w", err)
		}
		var m meta
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("trace: metadata %s: %w", filepath.Base(p), err)
		}
		if m.Ended != nil {
			continue
		}
		now := s.now().UTC()
		m.Ended = &now
		k := strings.TrimSuffix(filepath.Base(p), ".meta.json")
		if l, ok := s.logs[k]; ok {
			l.mu.Lock()
			l.meta = m
			l.mu.Unlock()
		}
		if err := writeMeta(p, m); err != nil {
			return err
		}
	}
	return nil
}

// Expire removes the traces whose sandbox ended more than the retention
// before now, and returns how many it removed.
func (s *Store) Expire(now time.Time) (int, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return 0, fmt.Errorf("trace: %w", err)
	}
	removed := 0
	for _, ent := range ents {
		k, ok := strings.CutSuffix(ent.Name(), ".meta.json")
		if !ok {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir, ent.Name()))
		if err != nil {
			continue
		}
		var m meta
		if json.Unmarshal(b, &m) != nil || m.Ended == nil || now.Sub(*m.Ended) < s.retention {
			continue
		}
		s.mu.Lock()
		if l, ok := s.logs[k]; ok {
			l.f.Close()
			delete(s.logs, k)
		}
		os.Remove(s.path(k))
		os.Remove(s.metaPath(k))
		s.mu.Unlock()
		removed++
	}
	return removed, nil
}

// Close closes the open traces.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, l := range s.logs {
		l.f.Close()
		delete(s.logs, id)
	}
	return nil
}
