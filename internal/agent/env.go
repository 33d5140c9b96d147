package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"genesis.dev/sandbox/internal/errdefs"
)

// DefaultPath is the PATH a job gets unless the container or request sets one.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// internalEnvPrefix marks agent-internal variables that never reach jobs.
const internalEnvPrefix = "GENESIS_AGENT_"

// baseEnv is the environment every job starts from, computed once.
type baseEnv struct {
	vars  map[string]string
	list  []string // "K=V", sorted, ready for exec when a request adds nothing
	path  []string // PATH entries of list
	order []string // keys of vars, sorted
}

// newBaseEnv builds the job base environment: PATH, HOME and LANG defaults,
// overlaid with the agent's own environment (what the container was started
// with) minus GENESIS_AGENT_* internals.
func newBaseEnv(environ []string, home string) *baseEnv {
	vars := map[string]string{
		"PATH": DefaultPath,
		"HOME": home,
		"LANG": "C.UTF-8",
	}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.HasPrefix(k, internalEnvPrefix) {
			continue
		}
		vars[k] = v
	}
	b := &baseEnv{vars: vars}
	for k := range vars {
		b.order = append(b.order, k)
	}
	sort.Strings(b.order)
	for _, k := range b.order {
		b.list = append(b.list, k+"="+vars[k])
	}
	b.path = filepath.SplitList(vars["PATH"])
	return b
}

// with returns the job environment with overlay applied, and its PATH entries.
func (b *baseEnv) with(overlay map[string]string) ([]string, []string, error) {
	if len(overlay) == 0 {
		return b.list, b.path, nil
	}
	for k, v := range overlay {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, nil, errdefs.Invalid("invalid environment variable %q", k)
		}
	}
	out := make([]string, 0, len(b.list)+len(overlay))
	for _, k := range b.order {
		if _, over := overlay[k]; over {
			continue
		}
		out = append(out, k+"="+b.vars[k])
	}
	extra := make([]string, 0, len(overlay))
	for k := range overlay {
		extra = append(extra, k)
	}
	sort.Strings(extra)
	for _, k := range extra {
		out = append(out, k+"="+overlay[k])
	}
	path := b.path
	if p, ok := overlay["PATH"]; ok {
		path = filepath.SplitList(p)
	}
	return out, path, nil
}

// defaultHome picks HOME when the container environment does not set one.
func defaultHome(workdir string) string {
	if fi, err := os.Stat(workdir); err == nil && fi.IsDir() {
		return workdir
	}
	return "/"
}

// lookPath resolves name like a shell would: names with a slash are used as
// given (relative ones against dir), others are searched in path. It returns
// the exit code to report when the program cannot be run (127 not found,
// 126 not executable) together with the error.
func lookPath(name string, path []string, dir string) (string, int, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if code, err := checkExecutable(p); err != nil {
			return "", code, err
		}
		return p, 0, nil
	}
	denied := ""
	for _, d := range path {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		code, err := checkExecutable(p)
		if err == nil {
			return p, 0, nil
		}
		if code == 126 && denied == "" {
			denied = p
		}
	}
	if denied != "" {
		return "", 126, fmt.Errorf("%s: permission denied", denied)
	}
	return "", 127, fmt.Errorf("%s: command not found", name)
}

// checkExecutable reports whether p is a regular file we may execute.
func checkExecutable(p string) (int, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		if err == syscall.EACCES {
			return 126, fmt.Errorf("%s: permission denied", p)
		}
		return 127, fmt.Errorf("%s: %w", p, err)
	}
	if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return 126, fmt.Errorf("%s: is a directory", p)
	}
	if err := syscall.Access(p, 1 /* X_OK */); err != nil {
		return 126, fmt.Errorf("%s: permission denied", p)
	}
	return 0, nil
}
