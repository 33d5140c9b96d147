package bench

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// VmRSSKiB returns the VmRSS field, in KiB, of the text of a
// /proc/<pid>/status file.
func VmRSSKiB(status string) (int64, error) {
	sc := bufio.NewScanner(strings.NewReader(status))
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("malformed VmRSS line %q", sc.Text())
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("malformed VmRSS line %q", sc.Text())
		}
		return n, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no VmRSS line in status")
}
