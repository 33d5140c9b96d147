package agent

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// procEntry is the part of /proc/PID/stat that tree tracking needs.
type procEntry struct {
	pid   int
	ppid  int
	state byte // R, S, D, Z, T, ...
}

// zombie reports whether the process has exited and waits to be reaped.
func (p procEntry) zombie() bool { return p.state == 'Z' || p.state == 'X' }

// parseProcStat parses the content of /proc/PID/stat: "pid (comm) state
// ppid ...". The command name may hold spaces and parentheses, so the fields
// are taken after the last ')'. It works on the kernel's /proc and on
// gVisor's emulated one.
func parseProcStat(b []byte) (procEntry, bool) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open <= 0 || end < open {
		return procEntry{}, false
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil || pid <= 0 {
		return procEntry{}, false
	}
	rest := b[end+1:]
	if len(rest) < 4 || rest[0] != ' ' {
		return procEntry{}, false
	}
	state := rest[1]
	rest = rest[2:]
	if rest[0] != ' ' {
		return procEntry{}, false
	}
	rest = rest[1:]
	n := bytes.IndexByte(rest, ' ')
	if n < 0 {
		n = len(bytes.TrimRight(rest, "\n"))
	}
	ppid, err := strconv.Atoi(string(rest[:n]))
	if err != nil || ppid < 0 {
		return procEntry{}, false
	}
	return procEntry{pid: pid, ppid: ppid, state: state}, true
}

// procScanner lists processes from a /proc directory, reusing its buffers
// between scans.
type procScanner struct {
	dir   string // normally /proc
	buf   []byte
	procs []procEntry
	kids  map[int][]int
}

func newProcScanner(dir string) *procScanner {
	return &procScanner{dir: dir, buf: make([]byte, 1024), kids: make(map[int][]int)}
}

// scan reads every /proc/PID/stat. Processes that vanish while it reads are
// skipped.
func (s *procScanner) scan() ([]procEntry, error) {
	d, err := os.Open(s.dir)
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	s.procs = s.procs[:0]
	for _, name := range names {
		if name == "" || name[0] < '0' || name[0] > '9' {
			continue
		}
		if p, ok := s.readStat(s.dir + "/" + name + "/stat"); ok {
			s.procs = append(s.procs, p)
		}
	}
	return s.procs, nil
}

func (s *procScanner) readStat(path string) (procEntry, bool) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return procEntry{}, false
	}
	defer syscall.Close(fd)
	n := 0
	for n < len(s.buf) {
		m, err := syscall.Read(fd, s.buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			break
		}
		n += m
	}
	return parseProcStat(s.buf[:n])
}

// descendants returns every process below root (root excluded), following
// parent links. Zombies are included: their parents still have to reap them.
func (s *procScanner) descendants(root int) ([]procEntry, error) {
	procs, err := s.scan()
	if err != nil {
		return nil, err
	}
	return treeBelow(procs, root, s.kids), nil
}

// treeBelow returns the processes of procs below root. kids is scratch
// space, cleared on entry.
func treeBelow(procs []procEntry, root int, kids map[int][]int) []procEntry {
	clear(kids)
	byPID := make(map[int]int, len(procs))
	for i, p := range procs {
		byPID[p.pid] = i
		if p.pid != p.ppid {
			kids[p.ppid] = append(kids[p.ppid], p.pid)
		}
	}
	var out []procEntry
	queue := append([]int(nil), kids[root]...)
	seen := map[int]bool{root: true}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		out = append(out, procs[byPID[pid]])
		queue = append(queue, kids[pid]...)
	}
	return out
}
