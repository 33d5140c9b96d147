package local

import (
	"context"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// WatchAgent reports, through inotify on the run directory, each time a
// name appears in it (the agent's socket when it binds), until ctx ends.
// The directory belongs to the sandbox user, which can make names appear
// too: a value only makes the wait dial now, which a poll would do
// anyway. nil when the directory cannot be watched (the wait then polls).
func (l *Sandboxer) WatchAgent(ctx context.Context, id string) <-chan struct{} {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil
	}
	if _, err := unix.InotifyAddWatch(fd, filepath.Join(l.SandboxDir(id), "run"), unix.IN_CREATE|unix.IN_MOVED_TO|unix.IN_ONLYDIR); err != nil {
		unix.Close(fd)
		return nil
	}
	f := os.NewFile(uintptr(fd), "inotify") // non-blocking: Close ends a pending Read
	wake := make(chan struct{}, 1)
	go func() {
		<-ctx.Done()
		f.Close()
	}()
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := f.Read(buf); err != nil {
				return
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	return wake
}
