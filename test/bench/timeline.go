package bench

import (
	"strings"
	"time"
)

// createTimelineMsg is the message of the service's debug line that ends
// every create (control's timeline).
const createTimelineMsg = `msg="create timeline"`

// CreateTimelines reads the service's log (slog text) and returns, for the
// creates under runtime, the duration of each step by step name, with the
// names in the order the first line gives them. Attributes that are not
// durations (the sandbox id, the runtime) are skipped; so are lines of
// other runtimes and of other messages.
func CreateTimelines(log, runtime string) (names []string, steps map[string][]time.Duration) {
	steps = map[string][]time.Duration{}
	for line := range strings.Lines(log) {
		_, rest, ok := strings.Cut(line, createTimelineMsg)
		if !ok {
			continue
		}
		attrs := map[string]string{}
		var order []string
		for _, f := range strings.Fields(rest) {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				continue
			}
			attrs[k] = v
			order = append(order, k)
		}
		if attrs["runtime"] != runtime {
			continue
		}
		for _, k := range order {
			d, err := time.ParseDuration(attrs[k])
			if err != nil {
				continue
			}
			if _, seen := steps[k]; !seen {
				names = append(names, k)
			}
			steps[k] = append(steps[k], d)
		}
	}
	return names, steps
}
