package artifacts

import (
	"fmt"
	"path"
	"strings"

	"genesis.dev/sandbox/internal/errdefs"
)

// Glob is one validated artifact pattern, relative to the workspace.
// Components use path.Match syntax; a component "**" matches zero or more
// directories ("report/**" is everything below report, "**/*.png" every
// PNG anywhere).
type Glob struct {
	parts []string
}

// Limits of artifact patterns.
const (
	MaxGlobs     = 32
	MaxGlobBytes = 1024
)

// ParseGlob validates a pattern. It may be relative to root or absolute
// below root; it must not climb out ("..") or be empty.
func ParseGlob(root, pattern string) (Glob, error) {
	bad := func(why string) (Glob, error) {
		return Glob{}, errdefs.WithCode("invalid_artifact_glob", fmt.Errorf(
			"artifact pattern %q: %s: %w", pattern, why, errdefs.ErrInvalidArgument))
	}
	p := pattern
	switch {
	case p == "":
		return bad("empty")
	case len(p) > MaxGlobBytes:
		return bad(fmt.Sprintf("longer than %d bytes", MaxGlobBytes))
	case strings.ContainsAny(p, "\x00\n\\"):
		return bad("contains a NUL, newline or backslash")
	}
	if strings.HasPrefix(p, "/") {
		rest, ok := strings.CutPrefix(p, strings.TrimSuffix(root, "/")+"/")
		if !ok {
			return bad("an absolute pattern must be below " + root)
		}
		p = rest
	}
	var parts []string
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "", ".":
			continue
		case "..":
			return bad(`".." is not allowed`)
		}
		if c != "**" {
			if strings.Contains(c, "**") {
				return bad(`"**" must be a whole path component`)
			}
			if _, err := path.Match(c, ""); err != nil {
				return bad("malformed pattern")
			}
		}
		parts = append(parts, c)
	}
	if len(parts) == 0 {
		return bad("matches nothing below the root")
	}
	return Glob{parts: parts}, nil
}

// Base is the longest leading directory without wildcards: the place a
// search for matches starts ("" for the root itself).
func (g Glob) Base() string {
	var fixed []string
	for _, c := range g.parts[:len(g.parts)-1] {
		if c == "**" || strings.ContainsAny(c, `*?[`) {
			break
		}
		fixed = append(fixed, c)
	}
	return strings.Join(fixed, "/")
}

// Depth is how many directory levels below Base a match can be: -1 when
// unbounded (the pattern has "**").
func (g Glob) Depth() int {
	n := len(g.parts) - len(strings.Split(g.Base(), "/"))
	if g.Base() == "" {
		n = len(g.parts)
	}
	for _, c := range g.parts {
		if c == "**" {
			return -1
		}
	}
	return n
}

// Match reports whether the slash-separated path rel (relative to the
// root) matches.
func (g Glob) Match(rel string) bool {
	return matchParts(g.parts, strings.Split(strings.Trim(rel, "/"), "/"))
}

func matchParts(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			if len(pat) == 1 {
				return len(name) > 0 // "dir/**" is every file below dir
			}
			for i := 0; i <= len(name); i++ {
				if matchParts(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], name[0]); !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}
