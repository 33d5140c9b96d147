package apiwire

import (
	"errors"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/errdefs"
)

func TestParseIfMatch(t *testing.T) {
	t.Parallel()
	cases := []struct {
		header string
		want   int64
		class  error // nil for success
	}{
		{"", 0, nil},
		{"*", 0, nil},
		{" * ", 0, nil},
		{`"7"`, 7, nil},
		{` "7" `, 7, nil},
		{"7", 7, nil}, // bare, for hand-written requests
		{`"7", "7"`, 7, nil},
		{`"bogus", "7"`, 7, nil},
		{`W/"3", "7"`, 7, nil},
		{`,"7",`, 7, nil},
		{`"9223372036854775807"`, 9223372036854775807, nil},

		// Well-formed tags that no current representation can match: 412.
		{`"bogus"`, 0, errdefs.ErrPreconditionFailed},
		{`"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"`, 0, errdefs.ErrPreconditionFailed},
		{`W/"7"`, 0, errdefs.ErrPreconditionFailed},
		{`""`, 0, errdefs.ErrPreconditionFailed},
		{`"0"`, 0, errdefs.ErrPreconditionFailed},
		{`"007"`, 0, errdefs.ErrPreconditionFailed},
		{`"-1"`, 0, errdefs.ErrPreconditionFailed},
		{`"99999999999999999999"`, 0, errdefs.ErrPreconditionFailed},
		{`"a", W/"b"`, 0, errdefs.ErrPreconditionFailed},

		// Malformed: 400.
		{"bogus", 0, errdefs.ErrInvalidArgument},
		{"0", 0, errdefs.ErrInvalidArgument},
		{"-3", 0, errdefs.ErrInvalidArgument},
		{"+3", 0, errdefs.ErrInvalidArgument},
		{`"7`, 0, errdefs.ErrInvalidArgument},
		{`7"`, 0, errdefs.ErrInvalidArgument},
		{`"a b"`, 0, errdefs.ErrInvalidArgument},
		{`"a"b`, 0, errdefs.ErrInvalidArgument},
		{`"a" "b"`, 0, errdefs.ErrInvalidArgument},
		{`*, "7"`, 0, errdefs.ErrInvalidArgument},
		{`w/"7"`, 0, errdefs.ErrInvalidArgument},
		{",", 0, errdefs.ErrInvalidArgument},
		{`"7", "8"`, 0, errdefs.ErrInvalidArgument}, // several versions: no single compare-and-swap
	}
	for _, c := range cases {
		got, err := ParseIfMatch(c.header)
		switch {
		case c.class == nil && (err != nil || got != c.want):
			t.Errorf("ParseIfMatch(%q) = %d, %v; want %d", c.header, got, err, c.want)
		case c.class != nil && !errors.Is(err, c.class):
			t.Errorf("ParseIfMatch(%q) = %d, %v; want %v", c.header, got, err, c.class)
		case c.class != nil && !strings.Contains(err.Error(), "If-Match"):
			t.Errorf("ParseIfMatch(%q): %q does not name the header", c.header, err)
		}
	}
}

func FuzzParseIfMatch(f *testing.F) {
	for _, s := range []string{"", "*", `"7"`, `W/"7"`, `"a", "7"`, "7", `"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		v, err := ParseIfMatch(h)
		if err == nil && v < 0 {
			t.Fatalf("ParseIfMatch(%q) = %d; want >= 0", h, v)
		}
		if err != nil && !errors.Is(err, errdefs.ErrInvalidArgument) && !errors.Is(err, errdefs.ErrPreconditionFailed) {
			t.Fatalf("ParseIfMatch(%q): %v; want a 400 or 412 class", h, err)
		}
		if err != nil && v != 0 {
			t.Fatalf("ParseIfMatch(%q) = %d with error %v", h, v, err)
		}
	})
}
