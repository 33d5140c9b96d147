//go:build !linux

package volumes

import (
	"syscall"
	"time"
)

// usedBytes is unknown where volumes are not made (they need Linux).
func usedBytes(string) (int64, bool) { return 0, false }

// statTimes are unknown here (volumes need Linux).
func statTimes(*syscall.Stat_t) (atime, ctime time.Time) { return time.Time{}, time.Time{} }
