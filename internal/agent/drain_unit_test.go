package agent

import (
	"syscall"
	"testing"
	"time"
)

// TestDrainEndsAtEndOfOutput: a drain of an output pipe whose writer has
// already gone, with no read deadline, ends at the pipe's end. A drain
// that first waits for the pipe to be readable without reading it loses
// that end when the poller delivered it before the wait began (arming
// the wait clears it, and an ended pipe sends no second one): the exec
// then waited for the drain deadline (100 ms by default) after its
// command's exit, now and then.
func TestDrainEndsAtEndOfOutput(t *testing.T) {
	t.Parallel()
	for i := range 300 {
		r, w, err := outputPipe()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := syscall.Write(w, []byte("out")); err != nil {
			t.Fatal(err)
		}
		syscall.Close(w)
		if i%2 == 0 {
			// Let the poller see the end first: a blocking read of
			// another pipe parks this goroutine, so the poller runs.
			var p [2]int
			if err := syscall.Pipe(p[:]); err != nil {
				t.Fatal(err)
			}
			syscall.Close(p[1])
			syscall.Read(p[0], make([]byte, 1))
			syscall.Close(p[0])
		}
		c := capture{max: 1 << 10}
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.drain(r, make([]byte, 64<<10))
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the drain of an ended pipe still waits after 10 s", i)
		}
		r.Close()
		if string(c.bytes()) != "out" {
			t.Fatalf("round %d: drained %q, want %q", i, c.bytes(), "out")
		}
	}
}
