package apiwire

import (
	"fmt"
	"strconv"
	"strings"

	"genesis.dev/sandbox/internal/errdefs"
)

// ParseIfMatch reads an If-Match header (RFC 9110 §13.1.1) for a resource
// whose ETag is the strong entity tag "<resourceVersion>". It returns the
// resourceVersion the write must find, or 0 when any current representation
// will do (no header, or "*").
//
//   - A strong tag naming a resourceVersion yields that version; the store
//     then answers 412 if the resource has moved on.
//   - Well-formed tags that can never match — weak tags (If-Match compares
//     strongly), opaque tags that are no resourceVersion such as "bogus" or
//     another resource's ETag — are ErrPreconditionFailed (412).
//   - A list naming several different resourceVersions cannot be checked by
//     one compare-and-swap and is ErrInvalidArgument, as is anything that is
//     not "*" or a list of entity tags (malformed, 400).
//
// A bare positive integer (3 for "3") is accepted for hand-written requests.
func ParseIfMatch(h string) (int64, error) {
	h = strings.TrimSpace(h)
	if h == "" || h == "*" {
		return 0, nil
	}
	if v, err := strconv.ParseInt(h, 10, 64); err == nil && v > 0 && h[0] != '+' {
		return v, nil
	}
	tags, err := splitEntityTags(h)
	if err != nil {
		return 0, err
	}
	var version int64
	for _, t := range tags {
		if strings.HasPrefix(t, "W/") {
			continue
		}
		v, ok := resourceVersionTag(t)
		if !ok {
			continue
		}
		if version != 0 && v != version {
			return 0, errdefs.Invalid("If-Match %q names several resourceVersions; send the one the write must find", h)
		}
		version = v
	}
	if version == 0 {
		return 0, fmt.Errorf("If-Match %q matches no current representation (the ETag is a strong \"<resourceVersion>\"): %w", h, errdefs.ErrPreconditionFailed)
	}
	return version, nil
}

// resourceVersionTag returns the resourceVersion of a strong entity tag of
// the form "123".
func resourceVersionTag(tag string) (int64, bool) {
	s := tag[1 : len(tag)-1]
	if s == "" || s[0] < '1' || s[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// splitEntityTags splits a comma-separated list of entity tags, rejecting
// anything that is not one (ErrInvalidArgument). Empty list elements are
// allowed, as RFC 9110 §5.6.1 asks of recipients.
func splitEntityTags(h string) ([]string, error) {
	var tags []string
	rest := h
	for {
		rest = strings.TrimLeft(rest, " \t")
		if rest == "" {
			break
		}
		if rest[0] == ',' {
			rest = rest[1:]
			continue
		}
		tag, tail, ok := cutEntityTag(rest)
		if !ok {
			return nil, errdefs.Invalid("If-Match %q is neither \"*\" nor a list of entity tags", h)
		}
		tags = append(tags, tag)
		tail = strings.TrimLeft(tail, " \t")
		if tail != "" && tail[0] != ',' {
			return nil, errdefs.Invalid("If-Match %q is neither \"*\" nor a list of entity tags", h)
		}
		rest = tail
	}
	if len(tags) == 0 {
		return nil, errdefs.Invalid("If-Match %q is neither \"*\" nor a list of entity tags", h)
	}
	return tags, nil
}

// cutEntityTag cuts one entity tag ([W/]"etagc*") off the front of s. The
// returned tag keeps its W/ prefix and quotes.
func cutEntityTag(s string) (tag, rest string, ok bool) {
	i := 0
	if strings.HasPrefix(s, "W/") {
		i = 2
	}
	if i >= len(s) || s[i] != '"' {
		return "", "", false
	}
	for j := i + 1; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '"':
			return s[:j+1], s[j+1:], true
		case c == 0x21 || (c >= 0x23 && c <= 0x7e) || c >= 0x80:
		default:
			return "", "", false
		}
	}
	return "", "", false
}
