package imagebuild

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
)

// fileLock is an exclusive advisory lock (flock) on a file, held between
// processes. The kernel drops it when the process dies, so a crashed build
// never leaves a stale lock behind.
type fileLock struct{ f *os.File }

// lockFile takes an exclusive lock on path, creating the file if needed. It
// polls until the lock is free or ctx is done.
func lockFile(ctx context.Context, path string, poll time.Duration) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file %s: %w: %w", path, errdefs.ErrInternal, err)
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return &fileLock{f: f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w: %w", path, errdefs.ErrInternal, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for lock %s (held by another build): %w: %w",
				path, errdefs.ErrDeadlineExceeded, ctx.Err())
		case <-t.C:
		}
	}
}

// unlock releases the lock. The lock file stays for the next build.
func (l *fileLock) unlock() {
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
}
