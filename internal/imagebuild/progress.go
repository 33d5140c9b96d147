package imagebuild

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
)

// State is where an image build stands.
type State string

// Build states.
const (
	// StateQueued: a Queue holds the build back until the builds before it end.
	StateQueued State = "queued"
	// StateWaiting: the build waits for another build to end (of this
	// process, or of another process that builds the same image).
	StateWaiting State = "waiting"
	// StateBuilding: a step of the build runs.
	StateBuilding State = "building"
	// StateBuilt: the image is present (built now, or found present).
	StateBuilt State = "built"
	// StateFailed: the build failed; Error says why.
	StateFailed State = "failed"
)

// The steps of a build, in order. StepPackages is left out for a recipe
// without packages.
const (
	StepBootstrap = "bootstrap" // debootstrap: a minimal Debian root filesystem
	StepPackages  = "packages"  // apt-get install of the recipe's packages
	StepSetup     = "setup"     // the recipe's setup scripts
	StepImport    = "import"    // the tree streamed into the container engine
)

// Progress is where one image's build stands. Done and Total count Unit
// within the current step (packages: package events such as retrieved,
// unpacked and configured; scripts; bytes); Total is 0 while the step
// does not know it yet. Percent estimates the whole build.
type Progress struct {
	Name       string    `json:"name"`
	Ref        string    `json:"ref"`
	State      State     `json:"state"`
	Step       string    `json:"step,omitempty"`
	StepNumber int       `json:"step_number,omitempty"`
	Steps      int       `json:"steps,omitempty"`
	Done       int64     `json:"done,omitempty"`
	Total      int64     `json:"total,omitempty"`
	Unit       string    `json:"unit,omitempty"`
	Percent    int       `json:"percent"`
	Detail     string    `json:"detail,omitempty"`
	StartedAt  time.Time `json:"started_at,omitzero"`
	UpdatedAt  time.Time `json:"updated_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	Error      string    `json:"error,omitempty"`
	// PID is the process that builds.
	PID int `json:"pid,omitempty"`
}

// Summary says in a few words where the build stands, e.g.
// "building 42%: packages (2/4) 120/230 packages".
func (p Progress) Summary() string {
	switch p.State {
	case StateBuilding:
		s := "building " + strconv.Itoa(p.Percent) + "%"
		if p.Step != "" {
			s += ": " + p.Step + " (" + strconv.Itoa(p.StepNumber) + "/" + strconv.Itoa(p.Steps) + ")"
			switch {
			case p.Unit == "bytes" && p.Total > 0:
				s += " " + mib(p.Done) + "/" + mib(p.Total) + " MiB"
			case p.Unit == "bytes":
				s += " " + mib(p.Done) + " MiB"
			case p.Total > 0:
				s += " " + strconv.FormatInt(p.Done, 10) + "/" + strconv.FormatInt(p.Total, 10) + " " + p.Unit
			case p.Done > 0:
				s += " " + strconv.FormatInt(p.Done, 10) + " " + p.Unit
			}
		}
		return s
	case StateFailed:
		if p.Error != "" {
			return "failed: " + firstLine(p.Error)
		}
		return "failed"
	case StateWaiting:
		if p.Detail != "" {
			return "waiting: " + p.Detail
		}
		return "waiting"
	default:
		return string(p.State)
	}
}

func mib(b int64) string { return strconv.FormatInt(b>>20, 10) }

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// stepWeights are the shares of the whole build the steps take, for
// Percent. They are rough: on a fresh host debootstrap and apt dominate.
var stepWeights = map[string]int{StepBootstrap: 40, StepPackages: 40, StepSetup: 10, StepImport: 10}

// Intervals of the progress log lines and status file writes.
const (
	progressLogEvery  = 10 * time.Second
	statusWriteEvery  = time.Second
	statusFilePerm    = 0o644
	statusDirName     = "status"
	staleBuildMessage = "the build was interrupted (its process ended)"
)

// tracker keeps one build's Progress, logs its steps and, at most every
// few seconds, its counters, and mirrors it into a status file that other
// processes read (ReadStatus). It is safe for concurrent use: a step's
// output parser updates it from the command's output goroutine.
type tracker struct {
	log        *slog.Logger
	statusPath string // "" writes none
	now        func() time.Time
	steps      []string

	mu         sync.Mutex
	p          Progress
	stepBase   int // percent of the steps before the current one
	stepWeight int // percent the current step is worth
	lastLog    time.Time
	lastLogged int64
	lastWrite  time.Time
}

func newTracker(log *slog.Logger, name, ref, statusPath string, steps []string) *tracker {
	t := &tracker{log: log, statusPath: statusPath, now: time.Now, steps: steps}
	t.p = Progress{Name: name, Ref: ref, State: StateWaiting, Steps: len(steps), PID: os.Getpid()}
	return t
}

// snapshot returns a copy of the progress.
func (t *tracker) snapshot() Progress {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.p
}

// attach makes the tracker mirror its progress into the status file at
// path, from now on: the build holds the image's lock.
func (t *tracker) attach(path string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.statusPath = path
	t.writeLocked(t.now(), true)
}

// waiting records that the build waits, and for what.
func (t *tracker) waiting(detail string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.p.State, t.p.Detail, t.p.UpdatedAt = StateWaiting, detail, t.now()
}

// step starts the named step, counting unit; total may be 0 (unknown).
func (t *tracker) step(name, unit string, total int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if t.p.StartedAt.IsZero() {
		t.p.StartedAt = now
	}
	weights := 0
	for _, s := range t.steps {
		weights += stepWeights[s]
	}
	base := 0
	for i, s := range t.steps {
		if s == name {
			t.p.StepNumber = i + 1
			break
		}
		base += stepWeights[s]
	}
	t.stepBase, t.stepWeight = base*100/max(weights, 1), stepWeights[name]*100/max(weights, 1)
	t.p.State, t.p.Step, t.p.Unit = StateBuilding, name, unit
	t.p.Done, t.p.Total, t.p.Detail, t.p.UpdatedAt = 0, total, "", now
	t.p.Percent = max(t.p.Percent, t.stepBase)
	t.lastLog, t.lastLogged = now, 0
	t.log.Info("image build step", "step", name, "of", strconv.Itoa(t.p.StepNumber)+"/"+strconv.Itoa(t.p.Steps),
		"percent", t.p.Percent)
	t.writeLocked(now, true)
}

// update sets the step's counters (total 0 keeps the known total) and
// its detail ("" keeps the last), and estimates the percentage: done of
// total when the total is known, else of guess (a rough expected total,
// up to a quarter of the step), so a counter that moves moves the
// percentage too.
func (t *tracker) update(done, total int64, detail string, guess int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.p.Done = done
	if total > 0 {
		t.p.Total = total
	}
	if detail != "" {
		t.p.Detail = detail
	}
	var frac float64
	switch {
	case t.p.Total > 0:
		frac = float64(t.p.Done) / float64(t.p.Total)
	case guess > 0:
		frac = float64(min(t.p.Done, guess)) / float64(guess) / 4
	}
	frac = min(frac, 0.99)
	// Never backwards: a guessed total that turns out low is not undone.
	t.p.Percent = min(max(t.p.Percent, t.stepBase+int(frac*float64(t.stepWeight))), 99)
	t.p.UpdatedAt = now
	if now.Sub(t.lastLog) >= progressLogEvery && t.p.Done != t.lastLogged {
		t.lastLog, t.lastLogged = now, t.p.Done
		t.log.Info("image build progress", "step", t.p.Step, "done", t.p.Done, "total", t.p.Total, "unit", t.p.Unit,
			"percent", t.p.Percent, "detail", t.p.Detail)
	}
	t.writeLocked(now, false)
}

// finish records the build's end: built (err nil) or failed. A build
// that was stopped (its context ended) leaves no status file: it did not
// fail, and the next build starts over.
func (t *tracker) finish(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.p.FinishedAt, t.p.UpdatedAt = now, now
	if err != nil {
		t.p.State, t.p.Error = StateFailed, err.Error()
		if errors.Is(err, context.Canceled) || errors.Is(err, errdefs.ErrDeadlineExceeded) {
			if t.statusPath != "" {
				_ = os.Remove(t.statusPath)
			}
			return
		}
		t.writeLocked(now, true)
		return
	}
	t.p.State, t.p.Percent, t.p.Detail = StateBuilt, 100, ""
	if t.statusPath != "" {
		// The image itself says it is built from now on.
		_ = os.Remove(t.statusPath)
	}
}

// writeLocked mirrors the progress into the status file: always when
// force, else at most every statusWriteEvery. Errors are ignored: the
// file is a convenience for other processes, never needed by the build.
func (t *tracker) writeLocked(now time.Time, force bool) {
	if t.statusPath == "" || (!force && now.Sub(t.lastWrite) < statusWriteEvery) {
		return
	}
	t.lastWrite = now
	b, err := json.Marshal(t.p)
	if err != nil {
		return
	}
	tmp := t.statusPath + ".tmp"
	if err := os.WriteFile(tmp, b, statusFilePerm); err != nil {
		return
	}
	_ = os.Rename(tmp, t.statusPath)
}

// countingReader reports the bytes read through it as the step's count.
type countingReader struct {
	r io.Reader
	t *tracker
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.n += int64(n)
		c.t.update(c.n, 0, "", 0)
	}
	return n, err
}

// treeSize estimates the size of a tar of the tree at root: the regular
// files' bytes plus a header block a file. Errors count nothing.
func treeSize(root string) int64 {
	var n int64
	_ = filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		n += 512
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += (info.Size() + 511) &^ 511
			}
		}
		return nil
	})
	return n
}

// refFile is an image reference as a file name: genesis_tool-basic_<hash>.
func refFile(ref string) string { return strings.NewReplacer("/", "_", ":", "_").Replace(ref) }

// statusPath is the status file of a build of image ref under workDir.
func statusPath(workDir, ref string) string {
	return filepath.Join(workDir, statusDirName, refFile(ref)+".json")
}

// lockPath is the lock file a build of image ref holds while it runs.
func lockPath(workDir, ref string) string {
	return filepath.Join(workDir, "locks", refFile(ref)+".lock")
}

// ReadStatus reads what the status file under workDir says of the build
// of image ref, written by whichever process builds it. ok is false when
// there is no such file (no build ran, or the last one succeeded). A
// build whose process is gone reads as failed.
func ReadStatus(workDir, ref string) (p Progress, ok bool) {
	b, err := os.ReadFile(statusPath(workDir, ref))
	if err != nil {
		return Progress{}, false
	}
	if err := json.Unmarshal(b, &p); err != nil || p.Ref != ref {
		return Progress{}, false
	}
	if p.State == StateFailed || p.State == StateBuilt {
		return p, true
	}
	if held, err := lockHeld(lockPath(workDir, ref)); err == nil && !held {
		p.State, p.Error = StateFailed, staleBuildMessage
	}
	return p, true
}

// lockHeld reports whether some process holds the lock on path. It takes
// the lock for an instant when it is free.
func lockHeld(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false, nil
}
