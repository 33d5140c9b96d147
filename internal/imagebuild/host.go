package imagebuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"genesis.dev/sandbox/internal/mountinfo"
)

// chrootPath is the PATH inside the image while its setup scripts run.
const chrootPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// findTool locates a host command. Root's tools live in sbin directories that
// a service's PATH may lack, so those are tried after PATH.
func findTool(lookPath func(string) (string, error), name string) (string, error) {
	if p, err := lookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on PATH or in sbin", name)
}

// command describes one host command run during a build.
type command struct {
	path  string
	args  []string
	env   []string
	stdin io.Reader
	// stdout, when set, receives standard output; otherwise standard output
	// is logged and kept with standard error for the error message.
	stdout io.Writer
	// privateMounts runs the command in its own mount namespace, so whatever
	// it mounts (debootstrap mounts /proc, /sys and maybe /dev in the target)
	// disappears with it, even if it is killed half-way.
	privateMounts bool
	// onLine, when set, receives every line of output (standard output
	// unless stdout is set, and standard error) as it comes, for progress.
	onLine func(string)
}

// run runs c to completion. The command runs in its own process group, and
// the whole group is killed when ctx is done. A failure returns an error with
// the tail of the command's output.
func (c command) run(ctx context.Context, log *slog.Logger) error {
	cmd := exec.CommandContext(ctx, c.path, c.args...)
	cmd.Env = c.env
	cmd.Stdin = c.stdin
	out := &outputLog{log: log, tool: filepath.Base(c.path), max: 16 << 10, onLine: c.onLine}
	cmd.Stdout = out
	if c.stdout != nil {
		cmd.Stdout = c.stdout
	}
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if c.privateMounts {
		cmd.SysProcAttr.Unshareflags = syscall.CLONE_NEWNS
	}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	out.flush()
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(c.path), strings.Join(shorten(c.args), " "), err, out.tail())
	}
	return nil
}

// shorten keeps long arguments (scripts) out of error messages.
func shorten(args []string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		if len(a) > 120 || strings.Contains(a, "\n") {
			out[i] = "<" + strconv.Itoa(len(a)) + " bytes>"
		}
	}
	return out
}

// outputLog logs a command's output line by line at debug level and keeps
// its last max bytes for error messages. It is safe for concurrent writes.
type outputLog struct {
	log    *slog.Logger
	tool   string
	max    int
	onLine func(string) // nil: none

	mu      sync.Mutex
	partial []byte
	kept    []byte
}

func (o *outputLog) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.kept = append(o.kept, p...)
	if len(o.kept) > 2*o.max {
		o.kept = append(o.kept[:0], o.kept[len(o.kept)-o.max:]...)
	}
	o.partial = append(o.partial, p...)
	for {
		i := bytes.IndexByte(o.partial, '\n')
		if i < 0 {
			break
		}
		o.emit(o.partial[:i])
		o.partial = o.partial[i+1:]
	}
	return len(p), nil
}

func (o *outputLog) emit(line []byte) {
	if s := strings.TrimSpace(string(line)); s != "" {
		o.log.Debug("build output", "tool", o.tool, "line", s)
		if o.onLine != nil {
			o.onLine(s)
		}
	}
}

func (o *outputLog) flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.emit(o.partial)
	o.partial = nil
}

// tail returns the last kept output, trimmed to whole lines.
func (o *outputLog) tail() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	t := o.kept
	if len(t) > o.max {
		t = t[len(t)-o.max:]
		if i := bytes.IndexByte(t, '\n'); i >= 0 {
			t = t[i+1:]
		}
	}
	return strings.TrimSpace(string(t))
}

// mountsUnder returns the mount points at or below dir in this process's
// mount namespace, deepest first.
func mountsUnder(dir string) ([]string, error) {
	mps, err := mountinfo.Read()
	if err != nil {
		return nil, err
	}
	dir = filepath.Clean(dir)
	var out []string
	for _, mp := range mps {
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out, nil
}

// unmountUnder detaches every mount at or below dir and verifies none remain.
func unmountUnder(dir string) error {
	mps, err := mountsUnder(dir)
	if err != nil {
		return fmt.Errorf("read mounts: %w", err)
	}
	var errs []error
	for _, mp := range mps {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
		}
	}
	left, err := mountsUnder(dir)
	if err != nil {
		return fmt.Errorf("read mounts: %w", err)
	}
	if len(left) > 0 {
		errs = append(errs, fmt.Errorf("still mounted under %s: %v", dir, left))
	}
	return errors.Join(errs...)
}

// removeScratch unmounts anything below dir and then deletes dir. It refuses
// to delete while something is still mounted below it, so a host directory
// bind-mounted into a half-built root filesystem is never touched.
func removeScratch(dir string) error {
	if err := unmountUnder(dir); err != nil {
		return fmt.Errorf("not removing %s: %w", dir, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}
