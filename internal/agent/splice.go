package agent

import (
	"errors"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// spliceOnThreads reports whether raw splices run on threads of their own
// (fdSplice) under the kernel of that release: under gVisor only.
// BenchmarkPortSplice, this way against the netpoller's in one
// interleaved run: under runsc a small exchange took 0.85× the time and
// 0.85× the sandbox's CPU; under runc 1.15–1.3× the time and 1.2–1.3× the
// container's CPU, with 1.8× the agent's context switches (perf stat):
// there a goroutine's thread, spinning for work after a write, finds the
// answer without sleeping, where a thread blocked in read(2) is woken by
// the kernel for each.
func spliceOnThreads(release string) bool {
	return strings.Contains(release, "gvisor")
}

// fdSplice carries the bytes of a raw port dial (splicePort) between the
// caller's connection and the sandbox's with one OS thread a direction,
// each blocked in read(2) on a blocking duplicate of its socket: data
// arriving wakes the one thread that moves it. The netpoller's way (a
// goroutine parked on each socket) wakes the poller's thread, which finds
// a P and may wake another thread by futex before the goroutine runs;
// under gVisor each of those wake-ups is a round trip through the
// sandbox's kernel.
//
// Ends as splicePort's goroutines do: the caller's end of sending shuts
// down the target's write side; the target's end, or an error either way,
// shuts both sockets down, which wakes the other direction's thread. stop
// does the same from outside (the server's shutdown). The duplicates are
// closed once both threads are done, and the threads end with their
// goroutines (locked, so not returned to the runtime's pool).
type fdSplice struct {
	caller, target *os.File // blocking duplicates, closed by run
	cfd, tfd       int
	stopOnce       sync.Once
}

// newFDSplice duplicates caller and target for an fdSplice. It reports
// false (nothing to close) when either is not a plain socket of this
// process: a wrapped connection keeps its own Close semantics (the agent's
// TCP listener closes admitted connections at a rekey), so it keeps the
// netpoller's splice.
func newFDSplice(caller net.Conn, target *net.TCPConn) (*fdSplice, bool) {
	var cf *os.File
	var err error
	switch c := caller.(type) {
	case *net.UnixConn:
		cf, err = c.File()
	case *net.TCPConn:
		cf, err = c.File()
	default:
		return nil, false
	}
	if err != nil {
		return nil, false
	}
	tf, err := target.File()
	if err != nil {
		cf.Close()
		return nil, false
	}
	// Fd puts each duplicate in blocking mode. The flag belongs to the
	// socket's open file, so the originals block too; nothing reads or
	// writes them from here on, they are only closed.
	return &fdSplice{caller: cf, target: tf, cfd: int(cf.Fd()), tfd: int(tf.Fd())}, true
}

// run moves head (what was read ahead of the dial's end) and then the
// bytes both ways until the splice ends, and closes the duplicates.
func (sp *fdSplice) run(head []byte) {
	upDone := make(chan struct{})
	go func() {
		defer close(upDone)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		sp.up(head)
	}()
	downDone := make(chan struct{})
	go func() {
		defer close(downDone)
		runtime.LockOSThread()
		sp.down()
	}()
	<-downDone
	<-upDone
	sp.close()
}

// close stops the splice and closes the duplicates. A stop after it (the
// server's shutdown hook) does nothing: the once is spent.
func (sp *fdSplice) close() {
	sp.stop()
	sp.caller.Close()
	sp.target.Close()
}

// up moves the caller's bytes to the target; the caller's EOF shuts the
// target's write side down (the service reads EOF).
func (sp *fdSplice) up(head []byte) {
	if len(head) > 0 {
		if writeFull(sp.tfd, head) != nil {
			sp.stop()
			return
		}
	}
	b := make([]byte, portChunk)
	for {
		n, err := readFD(sp.cfd, b)
		if n > 0 {
			if writeFull(sp.tfd, b[:n]) != nil {
				sp.stop()
				return
			}
			continue
		}
		if err == nil { // EOF
			unix.Shutdown(sp.tfd, unix.SHUT_WR)
			return
		}
		sp.stop()
		return
	}
}

// down moves the target's bytes to the caller until either ends.
func (sp *fdSplice) down() {
	b := make([]byte, portDownChunk)
	for {
		n, err := readFD(sp.tfd, b)
		if n <= 0 || err != nil || writeFull(sp.cfd, b[:n]) != nil {
			break
		}
	}
	sp.stop()
}

// stop ends both directions: a shutdown of both sockets wakes a thread
// blocked on either, and the caller reads EOF.
func (sp *fdSplice) stop() {
	sp.stopOnce.Do(func() {
		unix.Shutdown(sp.cfd, unix.SHUT_RDWR)
		unix.Shutdown(sp.tfd, unix.SHUT_RDWR)
	})
}

// readFD is a blocking read(2) of fd: n > 0 with data, 0 and nil at EOF.
func readFD(fd int, b []byte) (int, error) {
	for {
		n, err := unix.Read(fd, b)
		switch {
		case err == nil:
			return n, nil
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.EAGAIN):
			// Blocking mode was taken off the socket's file behind
			// our back: wait here rather than spin.
			if err := waitFD(fd, unix.POLLIN); err != nil {
				return 0, err
			}
		default:
			return 0, err
		}
	}
}

// writeFull writes all of b to fd with blocking write(2)s.
func writeFull(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		switch {
		case err == nil:
			b = b[n:]
		case errors.Is(err, unix.EINTR):
		case errors.Is(err, unix.EAGAIN):
			if err := waitFD(fd, unix.POLLOUT); err != nil {
				return err
			}
		default:
			return err
		}
	}
	return nil
}

// waitFD blocks until fd is ready for events (or hung up).
func waitFD(fd int, events int16) error {
	for {
		_, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: events}}, -1)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
