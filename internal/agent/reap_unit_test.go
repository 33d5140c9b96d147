package agent

import (
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestReapPidDispatchesOnlyAnExit checks that reapPid hands a registered
// child's exit to its waiter, and that it neither blocks nor dispatches
// while the child runs.
func TestReapPidDispatchesOnlyAnExit(t *testing.T) {
	sup := newSupervisor(slog.New(slog.DiscardHandler))
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	attr := &syscall.ProcAttr{Files: []uintptr{r.Fd(), null.Fd(), null.Fd()}}
	pid, done, err := sup.start("/bin/sh", []string{"sh", "-c", "read x; exit 3"}, attr, false, 0)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGKILL)
	// The shell waits for a line on the pipe: running, nothing to hand over.
	for range 3 {
		sup.reapPid(pid)
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case ei := <-done:
		t.Fatalf("status %v dispatched while the child runs", ei.status)
	default:
	}
	w.Close() // EOF: the read fails and the shell exits 3
	deadline := time.Now().Add(10 * time.Second)
	for {
		sup.reapPid(pid)
		select {
		case ei := <-done:
			if !ei.status.Exited() || ei.status.ExitStatus() != 3 {
				t.Fatalf("status %v, want exit 3", ei.status)
			}
			if sup.running() != 0 {
				t.Fatalf("%d children still registered after the dispatch", sup.running())
			}
			sup.reapPid(pid) // reaped already: ECHILD, nothing to hand over
			select {
			case ei := <-done:
				t.Fatalf("a second status %v", ei.status)
			default:
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("no exit status within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}
