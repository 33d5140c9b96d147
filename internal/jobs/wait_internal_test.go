package jobs

import "testing"

// TestJobEndedWakesWaiters: the end of a job wakes every waiter at once
// (Wait's re-read of the record is only a backstop), and waiters that
// leave, before or after the end, leave nothing behind.
func TestJobEndedWakesWaiters(t *testing.T) {
	t.Parallel()
	m := &Manager{waits: map[string]*jobWait{}}
	ch1, done1 := m.waiter("job_x")
	ch2, done2 := m.waiter("job_x")
	_, doneY := m.waiter("job_y")
	m.jobEnded("job_x")
	for i, ch := range []<-chan struct{}{ch1, ch2} {
		select {
		case <-ch:
		default:
			t.Errorf("waiter %d of job_x was not woken by its end", i)
		}
	}
	m.jobEnded("job_z") // nobody waits: nothing happens
	done1()
	done2()
	doneY()
	if len(m.waits) != 0 {
		t.Errorf("waits left behind: %v", m.waits)
	}
	// A waiter registered after an end waits for the next one.
	ch3, done3 := m.waiter("job_x")
	defer done3()
	select {
	case <-ch3:
		t.Error("a new waiter of job_x is woken by an end it did not wait for")
	default:
	}
}
