// Package mountinfo reads the mount points of this process's mount
// namespace from /proc/self/mountinfo. It imports nothing of the project.
package mountinfo

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
)

// Read returns every mount point of this process's mount namespace, in
// mount order.
func Read() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

// Parse returns the mount points (the fifth field, unescaped) of
// mountinfo-formatted lines.
func Parse(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		out = append(out, Unescape(fields[4]))
	}
	return out, sc.Err()
}

// Unescape decodes the octal escapes (\040 for space, ...) the kernel
// writes into mountinfo paths; anything else is kept as is.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
