package imagebuild

import (
	"strconv"
	"strings"
)

// A counter reads a build tool's output line by line and counts what the
// tool reports doing, for the build's progress. Counters are pure: fed
// the same lines, they count the same.
type counter interface {
	// line takes one output line and reports the counts after it, and a
	// short description of what the tool does now ("" when the line
	// says nothing new). changed is false for lines that count nothing.
	line(s string) (c counts, changed bool)
}

// counts is a counter's state: done of total (0: not known yet) events,
// and guess, an expected total to estimate against while total is 0.
type counts struct {
	done, total, guess int64
	detail             string
}

// debootstrapCounter counts debootstrap's package events. debootstrap
// names every package as it validates it (after retrieving it, or from
// the cache), extracts the required ones, then unpacks and configures
// each: "I: Validating libc6 2.36-9", "I: Extracting libc6...",
// "I: Unpacking libc6...", "I: Configuring libc6...". The number of
// packages is known once extraction starts (every package is validated
// first): the total is then 4 events a package, until unpacking starts
// and the number extracted (the required packages only) is known too.
type debootstrapCounter struct {
	validated, extracted, unpacked, configured int64
}

// debootstrapGuess is about the number of packages of a minbase system,
// for the percentage while the number is not known yet.
const debootstrapGuess = 4 * 90

func (c *debootstrapCounter) line(s string) (counts, bool) {
	msg, ok := strings.CutPrefix(strings.TrimSpace(s), "I: ")
	if !ok {
		return counts{}, false
	}
	verb, rest, _ := strings.Cut(msg, " ")
	pkg := strings.TrimSuffix(rest, "...")
	single := pkg != "" && !strings.Contains(pkg, " ") // "Unpacking the base system..." is a phase
	switch {
	case verb == "Validating" && len(strings.Fields(rest)) == 2: // a package and its version
		c.validated++
	case verb == "Retrieving" && len(strings.Fields(rest)) == 2:
		// Downloads move the detail; the count moves at validation.
	case verb == "Extracting" && single:
		c.extracted++
	case verb == "Unpacking" && single:
		c.unpacked++
	case verb == "Configuring" && single:
		c.configured++
	default:
		return counts{}, false
	}
	out := counts{done: c.validated + c.extracted + c.unpacked + c.configured, guess: debootstrapGuess, detail: msg}
	switch {
	case c.unpacked+c.configured > 0:
		out.total = 3*c.validated + c.extracted
	case c.extracted > 0:
		out.total = 4 * c.validated
	}
	if out.total > 0 {
		out.done = min(out.done, out.total)
	}
	return out, true
}

// aptCounter counts apt-get install's events: the summary line names the
// number of new packages ("0 upgraded, 152 newly installed, …"), then
// each is downloaded ("Get:12 http://…", none for cached ones), unpacked
// ("Unpacking python3 (3.11.2-1) ...") and set up ("Setting up …"): 3
// events a package.
type aptCounter struct {
	packages, got, unpacked, setUp int64
}

func (c *aptCounter) line(s string) (counts, bool) {
	s = strings.TrimSpace(s)
	switch {
	case strings.Contains(s, " newly installed, "):
		fields := strings.Fields(s)
		for i, f := range fields {
			if f == "newly" && i > 0 {
				if n, err := strconv.ParseInt(fields[i-1], 10, 64); err == nil {
					c.packages = n
				}
			}
		}
	case strings.HasPrefix(s, "Get:"):
		c.got++
	case strings.HasPrefix(s, "Unpacking "):
		c.unpacked++
	case strings.HasPrefix(s, "Setting up "):
		c.setUp++
	default:
		return counts{}, false
	}
	got := c.got
	if c.unpacked > 0 {
		got = c.packages // cached packages are never "Get"
	}
	out := counts{done: got + c.unpacked + c.setUp, total: 3 * c.packages}
	if out.total > 0 {
		out.done = min(out.done, out.total)
	}
	out.detail = s
	if strings.HasPrefix(s, "Get:") {
		// "Get:12 http://deb.debian.org/debian bookworm/main amd64 libc6 amd64 2.36-9 [2758 kB]"
		if f := strings.Fields(s); len(f) == 9 {
			out.detail = "Get " + f[4] + " " + strings.Join(f[6:], " ")
		}
	}
	return out, true
}

// lineCounter feeds a counter from a command's output and reports to the
// build's tracker.
func lineCounter(t *tracker, c counter) func(string) {
	return func(s string) {
		if n, ok := c.line(s); ok {
			t.update(n.done, n.total, shortDetail(n.detail), n.guess)
		}
	}
}

// detailLines reports every non-empty output line as the step's detail.
func detailLines(t *tracker, done func() int64) func(string) {
	return func(s string) {
		if s = strings.TrimSpace(s); s != "" {
			t.update(done(), 0, shortDetail(s), 0)
		}
	}
}

// shortDetail keeps a detail to one readable line.
func shortDetail(s string) string {
	const maxDetail = 120
	s = firstLine(s)
	if r := []rune(s); len(r) > maxDetail {
		s = string(r[:maxDetail-1]) + "…"
	}
	return s
}
