package sandbox

import (
	"testing"
	"time"
)

func TestLeaseExpiry(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		state LeaseState
		exp   time.Time
		want  LeaseState
	}{
		{LeaseActive, now.Add(time.Nanosecond), LeaseActive},
		{LeaseActive, now, LeaseExpired},
		{LeaseActive, now.Add(-time.Hour), LeaseExpired},
		{LeaseReleased, now.Add(-time.Hour), LeaseReleased},
		{LeaseExpired, now.Add(time.Hour), LeaseExpired},
	} {
		l := &Lease{State: tc.state, ExpiresAt: tc.exp}
		if got := l.Effective(now); got != tc.want {
			t.Errorf("%s lease expiring %v at %v: effective %s, want %s", tc.state, tc.exp, now, got, tc.want)
		}
		if l.Expired(now) != (tc.state == LeaseActive && tc.want == LeaseExpired) {
			t.Errorf("%s lease expiring %v: Expired = %v", tc.state, tc.exp, l.Expired(now))
		}
	}
	if !LeaseReleased.Final() || !LeaseExpired.Final() || LeaseActive.Final() {
		t.Error("Final: released and expired are final, active is not")
	}
}
