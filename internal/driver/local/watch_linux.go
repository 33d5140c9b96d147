package local

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"

	"genesis.dev/sandbox/internal/driver"
)

// WatchAgent reports, through inotify on the run directory, each time the
// agent's socket's name appears in it (at its bind), until ctx ends.
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
			n, err := f.Read(buf)
			if err != nil {
				return
			}
			if !namesSocket(buf[:n]) {
				continue // the identity file, say: the agent has not bound yet
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	return wake
}

// namesSocket says whether the inotify events in b (whole events, as one
// read returns them) name the agent's socket.
func namesSocket(b []byte) bool {
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(b) {
			return false
		}
		name, _, _ := bytes.Cut(b[unix.SizeofInotifyEvent:end], []byte{0}) // NUL-padded
		if string(name) == driver.AgentSocketRel {
			return true
		}
		b = b[end:]
	}
	return false
}
