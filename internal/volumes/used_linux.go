package volumes

import (
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// usedBytes answers the bytes in use on the filesystem mounted on dir
// (statfs: its blocks less its free blocks, times the block size; no walk
// of the files), and false when dir is not a mount point: then statfs
// would describe the filesystem below it, not the volume's.
func usedBytes(dir string) (int64, bool) {
	var st, parent unix.Stat_t
	if unix.Stat(dir, &st) != nil || unix.Stat(filepath.Dir(dir), &parent) != nil || st.Dev == parent.Dev {
		return 0, false
	}
	var fs unix.Statfs_t
	if unix.Statfs(dir, &fs) != nil || fs.Blocks < fs.Bfree {
		return 0, false
	}
	return int64(fs.Blocks-fs.Bfree) * int64(fs.Bsize), true
}

// statTimes are the atime and ctime of st.
func statTimes(st *syscall.Stat_t) (atime, ctime time.Time) {
	return time.Unix(st.Atim.Unix()).UTC(), time.Unix(st.Ctim.Unix()).UTC()
}
