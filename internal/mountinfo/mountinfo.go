// Package mountinfo reads the mount points of this process's mount
// namespace from /proc/self/mountinfo. It imports nothing of the project.
package mountinfo

import (
	"bufio"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Read returns every mount point of this process's mount namespace, in
// mount order.
func Read() ([]string, error) {
	ms, err := ReadMounts()
	return points(ms), err
}

// Parse returns the mount points (the fifth field, unescaped) of
// mountinfo-formatted lines.
func Parse(r io.Reader) ([]string, error) {
	ms, err := ParseMounts(r)
	return points(ms), err
}

func points(ms []Mount) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Point)
	}
	return out
}

// Mount is one mount of the namespace.
type Mount struct {
	Point     string // mount point, unescaped
	FSType    string // file system type ("" when the line has none)
	ReadWrite bool   // mounted read-write (the per-mount options say rw)
}

// ReadMounts returns every mount of this process's mount namespace, in
// mount order.
func ReadMounts() ([]Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseMounts(f)
}

// ParseMounts parses mountinfo-formatted lines: "id parent maj:min root
// point options [optional fields...] - fstype source superoptions".
func ParseMounts(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		m := Mount{Point: Unescape(fields[4])}
		if len(fields) > 5 {
			m.ReadWrite = slices.Contains(strings.Split(fields[5], ","), "rw")
		}
		if sep := slices.Index(fields, "-"); sep >= 6 && sep+1 < len(fields) {
			m.FSType = fields[sep+1]
		}
		out = append(out, m)
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
