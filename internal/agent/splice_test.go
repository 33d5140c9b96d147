package agent

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// spliceEnds is one fdSplice under test: caller is the service's end of
// the caller's Unix connection, service the sandbox service's end of the
// target's TCP connection.
type spliceEnds struct {
	caller  *net.UnixConn
	service *net.TCPConn
	sp      *fdSplice
	done    chan struct{} // closed when run returns
}

// startSplice makes a Unix connection and a loopback TCP connection,
// splices them with an fdSplice sending head first, and returns the two
// far ends. Everything it made is closed by the test's end.
func startSplice(t *testing.T, head []byte) *spliceEnds {
	t.Helper()
	dir := t.TempDir()
	uln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "s"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer uln.Close()
	tln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer tln.Close()
	caller, err := net.DialUnix("unix", nil, uln.Addr().(*net.UnixAddr))
	if err != nil {
		t.Fatal(err)
	}
	spCaller, err := uln.AcceptUnix()
	if err != nil {
		t.Fatal(err)
	}
	spTarget, err := net.DialTCP("tcp4", nil, tln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	service, err := tln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	sp, ok := newFDSplice(spCaller, spTarget)
	if !ok {
		t.Fatal("newFDSplice refused a Unix and a TCP connection")
	}
	e := &spliceEnds{caller: caller, service: service, sp: sp, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		defer spCaller.Close() // as splicePort's callers do
		defer spTarget.Close()
		sp.run(head)
	}()
	t.Cleanup(func() {
		caller.Close()
		service.Close()
		e.wait(t)
	})
	return e
}

// wait fails t unless the splice's run returns within 10 s.
func (e *spliceEnds) wait(t *testing.T) {
	t.Helper()
	select {
	case <-e.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the splice did not end within 10s")
	}
}

// readAllWithin reads c to EOF within 10 s.
func readAllWithin(t *testing.T, c net.Conn) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read to EOF: %v (got %d bytes)", err, len(b))
	}
	return b
}

// TestFDSpliceBothWays: the head comes first, then bytes both ways,
// unchanged and in order, large and small.
func TestFDSpliceBothWays(t *testing.T) {
	e := startSplice(t, []byte("head:"))
	up := bytes.Repeat([]byte("0123456789abcdef"), 300<<10/16)
	go func() {
		e.caller.Write(up)
		e.caller.CloseWrite()
	}()
	got := readAllWithin(t, e.service)
	if want := append([]byte("head:"), up...); !bytes.Equal(got, want) {
		t.Fatalf("the service read %d bytes, want %d (the head then the caller's)", len(got), len(want))
	}
	down := bytes.Repeat([]byte("fedcba9876543210"), 700<<10/16)
	go func() {
		e.service.Write(down)
		e.service.Close()
	}()
	if got := readAllWithin(t, e.caller); !bytes.Equal(got, down) {
		t.Fatalf("the caller read %d bytes, want the service's %d", len(got), len(down))
	}
	e.wait(t)
}

// TestFDSpliceSmallExchanges: request/answer pairs cross one at a time, as
// DevTools commands do.
func TestFDSpliceSmallExchanges(t *testing.T) {
	e := startSplice(t, nil)
	go io.Copy(e.service, e.service)
	e.caller.SetDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, 64)
	for i := range 50 {
		msg := []byte(strings.Repeat(strconv.Itoa(i%10), 64))
		if _, err := e.caller.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(e.caller, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("exchange %d: answer %q, want %q", i, got, msg)
		}
	}
}

// TestFDSpliceHalfClose: the caller's end of sending reaches the service
// as EOF while the service's answer still comes back.
func TestFDSpliceHalfClose(t *testing.T) {
	e := startSplice(t, nil)
	e.caller.Write([]byte("question"))
	e.caller.CloseWrite()
	if got := readAllWithin(t, e.service); string(got) != "question" {
		t.Fatalf("the service read %q, want question and EOF", got)
	}
	e.service.Write([]byte("answer"))
	e.service.CloseWrite()
	if got := readAllWithin(t, e.caller); string(got) != "answer" {
		t.Fatalf("the caller read %q, want answer and EOF", got)
	}
	e.wait(t)
}

// TestFDSpliceServiceCloses: the service's close ends the caller's reads
// and the splice, even with the caller still sending nothing.
func TestFDSpliceServiceCloses(t *testing.T) {
	e := startSplice(t, nil)
	e.service.Write([]byte("bye"))
	e.service.Close()
	if got := readAllWithin(t, e.caller); string(got) != "bye" {
		t.Fatalf("the caller read %q, want bye and EOF", got)
	}
	e.wait(t)
}

// TestFDSpliceStop: a stop from outside (the server's shutdown) ends a
// live, idle splice both ways; a second stop, after run, does nothing.
func TestFDSpliceStop(t *testing.T) {
	e := startSplice(t, nil)
	e.sp.stop()
	if got := readAllWithin(t, e.caller); len(got) != 0 {
		t.Fatalf("the caller read %q, want EOF", got)
	}
	if got := readAllWithin(t, e.service); len(got) != 0 {
		t.Fatalf("the service read %q, want EOF", got)
	}
	e.wait(t)
	e.sp.stop()
}

// TestFDSpliceStopsBlockedWriter: a stop also ends a direction blocked in
// a write to a peer that does not read.
func TestFDSpliceStopsBlockedWriter(t *testing.T) {
	e := startSplice(t, nil)
	go func() {
		big := make([]byte, 1<<20)
		for {
			if _, err := e.caller.Write(big); err != nil {
				return
			}
		}
	}()
	// Let the buffers fill: the service reads nothing.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		e.service.SetReadDeadline(time.Now())
		n, _ = e.service.Read(make([]byte, 1))
		if n == 0 {
			break
		}
	}
	time.Sleep(50 * time.Millisecond)
	e.sp.stop()
	e.wait(t)
}

// TestFDSpliceNoLeaks opens 100 splices at once, exchanges over each,
// closes them from either side, and checks that goroutines, OS threads and
// file descriptors come back to what they were.
func TestFDSpliceNoLeaks(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc: cannot count threads and fds")
	}
	warm := startSplice(t, nil)
	warm.caller.Close()
	warm.service.Close()
	warm.wait(t)
	g0, th0, fd0 := runtime.NumGoroutine(), threadCount(t), socketCount(t)

	ends := make([]*spliceEnds, 100)
	for i := range ends {
		ends[i] = startSplice(t, nil)
	}
	for i, e := range ends {
		go func() {
			io.Copy(e.service, e.service)
			e.service.CloseWrite()
		}()
		e.caller.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := e.caller.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 4)
		if _, err := io.ReadFull(e.caller, got); err != nil || string(got) != "ping" {
			t.Fatalf("splice %d: read %q, %v", i, got, err)
		}
		if i%2 == 0 {
			e.caller.Close()
		} else {
			e.service.Close()
		}
	}
	for _, e := range ends {
		e.wait(t)
		e.caller.Close()
		e.service.Close()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		g, th, fd := runtime.NumGoroutine(), threadCount(t), socketCount(t)
		// Threads the runtime started for other work may stay parked;
		// the splices' 200 must not.
		if g <= g0 && th <= th0+10 && fd <= fd0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 100 splices: %d goroutines (were %d), %d threads (were %d), %d sockets (were %d)", g, g0, th, th0, fd, fd0)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func threadCount(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads: line in /proc/self/status")
	return 0
}

// socketCount counts the process's open sockets (other fds come and go
// with the test binary's own work).
func socketCount(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}
