package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"genesis.dev/sandbox/client"
)

// printJSON writes v as indented JSON followed by a newline.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// callAndPrint runs fn with a client under --timeout and prints its result:
// as JSON with -o json, else with text.
func callAndPrint[T any](a *app, cmd *cobra.Command, fn func(context.Context, *client.Client) (T, error), text func(T) error) error {
	c, err := a.client()
	if err != nil {
		return err
	}
	ctx, cancel := a.callContext(cmd.Context())
	defer cancel()
	v, err := fn(ctx, c)
	if err != nil {
		return err
	}
	if a.jsonOutput() {
		return printJSON(a.stdout, v)
	}
	return text(v)
}

// printTable writes a tab-aligned table to w: the header line, then what
// row writes for each item.
func printTable[T any](w io.Writer, header string, items []T, row func(w io.Writer, item T)) error {
	tw := newTable(w)
	fmt.Fprintln(tw, header)
	for _, it := range items {
		row(tw, it)
	}
	return tw.Flush()
}

// newTable returns a tab-aligned writer; the caller flushes it.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// field is one "Key: value" line of a detail view.
type field struct {
	key   string
	value string
}

// printFields writes aligned "Key: value" lines, skipping empty values.
func printFields(w io.Writer, fields []field) error {
	tw := newTable(w)
	for _, f := range fields {
		if f.value == "" {
			continue
		}
		fmt.Fprintf(tw, "%s:\t%s\n", f.key, f.value)
	}
	return tw.Flush()
}

// parseKV turns repeated "KEY=VALUE" flag values into a map; flag names the
// flag in error messages. VALUE may be empty and may contain '='.
func parseKV(flag string, pairs []string) (map[string]string, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usageErrorf("--%s wants KEY=VALUE, got %q", flag, p)
		}
		m[k] = v
	}
	return m, nil
}

// joinMap renders a map as "k=v, k2=v2" in key order.
func joinMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ", ")
}

// orDash returns s, or "-" when s is empty (for table cells).
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shortDuration renders d compactly for tables: 45s, 12m, 5h, 3d.
func shortDuration(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	default:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	}
}

// formatTime renders t in UTC RFC 3339; the zero time is "".
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// isSafeWord reports whether a needs no quoting for display.
func isSafeWord(a string) bool {
	if a == "" {
		return false
	}
	for _, r := range a {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			strings.ContainsRune("_@%+=:,./-", r)
		if !ok {
			return false
		}
	}
	return true
}

// shellJoin renders argv for display as a POSIX shell would read it.
func shellJoin(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if isSafeWord(a) {
			parts[i] = a
		} else {
			parts[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(parts, " ")
}

// exactArgs is cobra.ExactArgs reporting a usage error; arguments must
// not be empty.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErrorf("want %s, got %d argument(s)", names, len(args))
		}
		return noEmptyArgs(args)
	}
}

// minArgs is cobra.MinimumNArgs reporting a usage error; the first n
// arguments must not be empty.
func minArgs(n int, names string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < n {
			return usageErrorf("want %s", names)
		}
		return noEmptyArgs(args[:n])
	}
}

// noEmptyArgs refuses empty ids such as an unset shell variable gives.
func noEmptyArgs(args []string) error {
	for i, a := range args {
		if a == "" {
			return usageErrorf("argument %d is empty", i+1)
		}
	}
	return nil
}
