package imagebuild

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/testenv"
)

// feed runs lines through a counter and returns the counts after each
// line that counted.
func feed(c counter, lines []string) []counts {
	var out []counts
	for _, l := range lines {
		if n, ok := c.line(l); ok {
			out = append(out, n)
		}
	}
	return out
}

func TestDebootstrapCounter(t *testing.T) {
	t.Parallel()
	lines := []string{
		"I: Retrieving InRelease",
		"I: Checking Release signature",
		"I: Valid Release signature (key id 4D64FEC119C2029067D6E791F8D2585B8783D481)",
		"I: Retrieving Packages",
		"I: Validating Packages ",
		"I: Resolving dependencies of required packages...",
		"I: Retrieving libc6 2.36-9+deb12u4",
		"I: Validating libc6 2.36-9+deb12u4",
		"I: Validating base-files 12.4+deb12u5",
		"I: Validating dash 0.5.12-2",
		"I: Chosen extractor for .deb packages: dpkg-deb",
		"I: Extracting base-files...",
		"I: Extracting libc6...",
		"I: Installing core packages...",
		"I: Unpacking required packages...",
		"I: Unpacking base-files...",
		"I: Unpacking dash...",
		"I: Unpacking libc6...",
		"I: Configuring required packages...",
		"I: Configuring base-files...",
		"dpkg: warning: something unrelated",
		"I: Configuring libc6...",
		"I: Configuring dash...",
		"I: Base system installed successfully.",
	}
	got := feed(&debootstrapCounter{}, lines)
	var dones []int64
	for _, n := range got {
		dones = append(dones, n.done)
	}
	// Retrieving counts nothing but moves the detail; validations count
	// without a total; from the first extraction on the total is known.
	want := []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	if !slices.Equal(dones, want) {
		t.Fatalf("done after each counted line = %v, want %v", dones, want)
	}
	if got[3].total != 0 || got[3].guess == 0 {
		t.Errorf("before extraction: %+v, want no total and a guess", got[3])
	}
	last := got[len(got)-1]
	if last.total != 11 || last.done != 11 || last.detail != "Configuring dash..." {
		t.Errorf("at the end: %+v, want 11 of 11 (3 packages validated, unpacked and configured, 2 extracted)", last)
	}
	if got[5].total != 12 {
		t.Errorf("while extracting: %+v, want total 12 (3 packages × 4)", got[5])
	}
	if got[0].detail != "Retrieving libc6 2.36-9+deb12u4" {
		t.Errorf("retrieving detail = %q", got[0].detail)
	}
}

func TestAptCounter(t *testing.T) {
	t.Parallel()
	lines := []string{
		"Reading package lists...",
		"The following NEW packages will be installed:",
		"  libpython3.11-minimal python3",
		"0 upgraded, 2 newly installed, 0 to remove and 0 not upgraded.",
		"Need to get 5000 kB of archives.",
		"Get:1 http://deb.debian.org/debian bookworm/main amd64 libpython3.11-minimal amd64 3.11.2-6+deb12u6 [817 kB]",
		"Fetched 817 kB in 1s (900 kB/s)",
		"Selecting previously unselected package libpython3.11-minimal:amd64.",
		"Preparing to unpack .../libpython3.11-minimal_3.11.2-6+deb12u6_amd64.deb ...",
		"Unpacking libpython3.11-minimal:amd64 (3.11.2-6+deb12u6) ...",
		"Unpacking python3 (3.11.2-1+b1) ...",
		"Setting up libpython3.11-minimal:amd64 (3.11.2-6+deb12u6) ...",
		"Setting up python3 (3.11.2-1+b1) ...",
		"Processing triggers for libc-bin (2.36-9+deb12u4) ...",
	}
	got := feed(&aptCounter{}, lines)
	var dones, totals []int64
	for _, n := range got {
		dones, totals = append(dones, n.done), append(totals, n.total)
	}
	// The one cached package was never "Get": unpacking counts both
	// downloads as done.
	if want := []int64{0, 1, 3, 4, 5, 6}; !slices.Equal(dones, want) {
		t.Errorf("done = %v, want %v", dones, want)
	}
	if want := []int64{6, 6, 6, 6, 6, 6}; !slices.Equal(totals, want) {
		t.Errorf("total = %v, want %v", totals, want)
	}
	if got[1].detail != "Get libpython3.11-minimal 3.11.2-6+deb12u6 [817 kB]" {
		t.Errorf("download detail = %q", got[1].detail)
	}
}

func TestTrackerPercentAndLog(t *testing.T) {
	t.Parallel()
	var logged strings.Builder
	log := slog.New(slog.NewTextHandler(&logged, nil))
	tk := newTracker(log, "x", "genesis/x:1", "", []string{StepBootstrap, StepPackages, StepSetup, StepImport})
	clock := time.Unix(1000, 0)
	tk.now = func() time.Time { return clock }
	if p := tk.snapshot(); p.State != StateWaiting || p.Steps != 4 {
		t.Fatalf("new tracker = %+v", p)
	}
	tk.step(StepBootstrap, "packages", 0)
	// Without a total, the guess moves the percentage up to a quarter of
	// the step (bootstrap is 40% of this build).
	tk.update(90, 0, "Validating libc6", 90)
	if p := tk.snapshot(); p.Percent != 10 || p.StepNumber != 1 || p.State != StateBuilding {
		t.Errorf("guessed: %+v, want 10%% (a quarter of 40%%)", p)
	}
	tk.update(200, 400, "", 0)
	if p := tk.snapshot(); p.Percent != 20 || p.Detail != "Validating libc6" {
		t.Errorf("half of bootstrap: %+v, want 20%% and the detail kept", p)
	}
	// A lower estimate never moves the percentage back.
	tk.update(100, 800, "", 0)
	if p := tk.snapshot(); p.Percent != 20 {
		t.Errorf("after a larger total: %d%%, want 20", p.Percent)
	}
	tk.step(StepPackages, "packages", 0)
	if p := tk.snapshot(); p.Percent != 40 || p.StepNumber != 2 || p.Done != 0 {
		t.Errorf("packages step: %+v, want 40%%", p)
	}
	clock = clock.Add(progressLogEvery)
	tk.update(30, 60, "Unpacking python3", 0)
	if p := tk.snapshot(); p.Percent != 60 || p.Summary() != "building 60%: packages (2/4) 30/60 packages" {
		t.Errorf("half of packages: %+v (%s)", p, p.Summary())
	}
	tk.finish(nil)
	if p := tk.snapshot(); p.State != StateBuilt || p.Percent != 100 || p.FinishedAt.IsZero() {
		t.Errorf("finished: %+v", p)
	}
	for _, want := range []string{`msg="image build step" step=bootstrap of=1/4`, `msg="image build step" step=packages of=2/4`,
		`msg="image build progress" step=packages done=30 total=60 unit=packages percent=60 detail="Unpacking python3"`} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logged.String())
		}
	}
	if strings.Count(logged.String(), "image build progress") != 1 {
		t.Errorf("progress logged more often than every %v:\n%s", progressLogEvery, logged.String())
	}
}

// TestStatusFileAcrossProcesses: a build's status file says where it
// stands while its lock is held, reads as failed once the lock is free
// (the process died), keeps a failure, and goes away after a success.
func TestStatusFileAcrossProcesses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, d := range []string{"locks", statusDirName} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := ReadStatus(dir, "genesis/x:h1"); ok {
		t.Fatal("status without a file")
	}
	lock, err := lockFile(t.Context(), lockPath(dir, "genesis/x:h1"), 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	tk := newTracker(slog.New(slog.DiscardHandler), "x", "genesis/x:h1", "", []string{StepBootstrap, StepSetup, StepImport})
	tk.attach(statusPath(dir, "genesis/x:h1"))
	tk.step(StepBootstrap, "packages", 0)
	tk.update(5, 0, "Validating dash 0.5", 90)
	if p, ok := ReadStatus(dir, "genesis/x:h1"); !ok || p.State != StateBuilding || p.Step != StepBootstrap || p.PID != os.Getpid() {
		t.Errorf("while building: %+v %v", p, ok)
	}
	lock.unlock()
	if p, ok := ReadStatus(dir, "genesis/x:h1"); !ok || p.State != StateFailed || p.Error != staleBuildMessage {
		t.Errorf("after its process let go of the lock: %+v %v, want failed", p, ok)
	}
	tk.finish(errors.New("debootstrap: exit status 1\nmore"))
	if p, ok := ReadStatus(dir, "genesis/x:h1"); !ok || p.State != StateFailed || p.Summary() != "failed: debootstrap: exit status 1" {
		t.Errorf("failed: %+v %v", p, ok)
	}
	// A build that was stopped leaves nothing behind.
	tk.attach(statusPath(dir, "genesis/x:h1"))
	tk.finish(fmt.Errorf("debootstrap: %w: %w", errdefs.ErrDeadlineExceeded, context.Canceled))
	if _, ok := ReadStatus(dir, "genesis/x:h1"); ok {
		t.Error("status of a stopped build")
	}
	tk.attach(statusPath(dir, "genesis/x:h1"))
	tk.finish(nil)
	if _, err := os.Stat(statusPath(dir, "genesis/x:h1")); !os.IsNotExist(err) {
		t.Errorf("status file after a successful build: %v", err)
	}
}

// TestQueue builds in order, skips present images, records a failure
// and goes on, and wakes those who await a build.
func TestQueue(t *testing.T) {
	t.Parallel()
	tool := mustRecipe(t, "tool-basic")
	imp := &fakeImporter{present: map[string]bool{tool.Ref(): true}}
	b := newTestBuilder(t, imp)
	b.geteuid = func() int { return 1000 } // building code-python-basic fails: not root
	var built []string
	q, err := NewQueue(QueueConfig{Builder: b, Names: []string{"tool-basic", "code-python-basic", "tool-basic"},
		OnBuilt: func(name string) { built = append(built, name) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewQueue(QueueConfig{Builder: b, Names: []string{"no-such"}}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("unknown name: %v", err)
	}
	if got := q.Names(); !slices.Equal(got, []string{"tool-basic", "code-python-basic"}) {
		t.Errorf("names = %v (duplicates dropped, order kept)", got)
	}
	for _, p := range q.List() {
		if p.State != StateQueued || p.Ref == "" {
			t.Errorf("before Run: %+v", p)
		}
	}
	if _, ok := q.Status("desktop-vnc"); ok {
		t.Error("status of a name not queued")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	if p, _ := q.Await(ctx, "tool-basic"); p.State != StateQueued {
		t.Errorf("await before Run = %+v, want queued at the deadline", p)
	}
	cancel()

	// While another build of the builder runs, the first build waits and
	// says so.
	<-b.turn
	done := make(chan struct{})
	go func() { q.Run(t.Context()); close(done) }()
	testenv.Eventually(t, 10*time.Second, 5*time.Millisecond, "tool-basic waiting", func() (bool, string) {
		p, _ := q.Status("tool-basic")
		return p.State == StateWaiting, string(p.State)
	})
	if p, _ := q.Status("tool-basic"); !strings.Contains(p.Detail, "another image build") || p.Ref != tool.Ref() {
		t.Errorf("waiting: %+v", p)
	}
	b.turn <- struct{}{}
	p, _ := q.Await(t.Context(), "code-python-basic")
	if p.State != StateFailed || !strings.Contains(p.Error, "root") {
		t.Errorf("code-python-basic = %+v, want failed (not root)", p)
	}
	<-done
	if p, _ := q.Status("tool-basic"); p.State != StateBuilt || p.Percent != 100 {
		t.Errorf("tool-basic = %+v, want built", p)
	}
	if !slices.Equal(built, []string{"tool-basic"}) {
		t.Errorf("OnBuilt calls = %v", built)
	}
}
