package imagebuild

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"genesis.dev/sandbox/internal/errdefs"
)

// aptSourcesMirror returns the first Debian archive URI that the machine's apt
// sources under aptDir (normally /etc/apt) use for suite: deb822 files in
// sources.list.d/*.sources first, then one-line sources.list files.
//
// A Debian release the sources do not list is served by the archive of
// one they do (deb.debian.org/debian holds every release): the URI of the
// first listed Debian release is used.
func aptSourcesMirror(aptDir, suite string) (string, error) {
	uri, tried := sourcesMirror(aptDir, suite)
	if uri != "" {
		return uri, nil
	}
	if slices.Contains(debianReleases, suite) {
		for _, other := range debianReleases {
			if uri, _ := sourcesMirror(aptDir, other); uri != "" {
				return uri, nil
			}
		}
	}
	return "", fmt.Errorf("no apt source for suite %q in %v; set the builder's Mirror: %w",
		suite, tried, errdefs.ErrFailedPrecondition)
}

// debianReleases are the Debian codenames one archive serves together.
var debianReleases = []string{"bookworm", "trixie", "forky", "bullseye", "sid"}

func sourcesMirror(aptDir, suite string) (string, []string) {
	var tried []string
	deb822, _ := filepath.Glob(filepath.Join(aptDir, "sources.list.d", "*.sources"))
	sort.Strings(deb822)
	for _, f := range deb822 {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		tried = append(tried, f)
		if uri := mirrorFromDeb822(data, suite); uri != "" {
			return uri, tried
		}
	}
	lists, _ := filepath.Glob(filepath.Join(aptDir, "sources.list.d", "*.list"))
	sort.Strings(lists)
	lists = append([]string{filepath.Join(aptDir, "sources.list")}, lists...)
	for _, f := range lists {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		tried = append(tried, f)
		if uri := mirrorFromOneLine(data, suite); uri != "" {
			return uri, tried
		}
	}
	return "", tried
}

// mirrorFromDeb822 returns the first usable URI of a deb822 stanza whose
// Types include "deb", whose Suites include suite, and that is enabled.
func mirrorFromDeb822(data []byte, suite string) string {
	for _, stanza := range bytes.Split(normalizeNewlines(data), []byte("\n\n")) {
		fields := map[string]string{}
		var last string
		for _, line := range strings.Split(string(stanza), "\n") {
			switch {
			case strings.HasPrefix(line, "#"):
				continue
			case strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t"):
				if last != "" { // continuation line
					fields[last] += " " + strings.TrimSpace(line)
				}
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			last = strings.ToLower(strings.TrimSpace(k))
			fields[last] = strings.TrimSpace(v)
		}
		if strings.EqualFold(fields["enabled"], "no") {
			continue
		}
		if !slices.Contains(strings.Fields(fields["types"]), "deb") ||
			!slices.Contains(strings.Fields(fields["suites"]), suite) {
			continue
		}
		for _, uri := range strings.Fields(fields["uris"]) {
			if usableMirror(uri) {
				return uri
			}
		}
	}
	return ""
}

// mirrorFromOneLine returns the URI of the first "deb [options] URI suite
// component..." line for suite.
func mirrorFromOneLine(data []byte, suite string) string {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "deb" {
			continue
		}
		f = f[1:]
		if strings.HasPrefix(f[0], "[") { // options, possibly spanning fields
			for len(f) > 0 && !strings.HasSuffix(f[0], "]") {
				f = f[1:]
			}
			if len(f) == 0 {
				continue
			}
			f = f[1:]
		}
		if len(f) >= 2 && f[1] == suite && usableMirror(f[0]) {
			return f[0]
		}
	}
	return ""
}

// usableMirror reports whether debootstrap can fetch from uri.
func usableMirror(uri string) bool {
	for _, scheme := range []string{"http://", "https://", "file:/"} {
		if strings.HasPrefix(uri, scheme) {
			return true
		}
	}
	return false
}

func normalizeNewlines(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	// Lines holding only whitespace separate stanzas like empty ones.
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) == "" {
			lines[i] = ""
		}
	}
	return []byte(strings.Join(lines, "\n"))
}
