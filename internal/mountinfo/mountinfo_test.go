package mountinfo

import (
	"slices"
	"strings"
	"testing"
)

func TestUnescape(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`/a/b`:          "/a/b",
		`/a\040b`:       "/a b",
		`/a\011b\134c`:  "/a\tb\\c",
		`/trailing\04`:  `/trailing\04`,
		`/not\999octal`: `/not\999octal`,
	}
	for in, want := range cases {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	got, err := Parse(strings.NewReader("22 1 8:1 / / rw - ext4 /dev/root rw\nshort line\n30 22 7:0 / /d/sbx\\040b/ws rw - ext4 /dev/loop0 rw\n"))
	if err != nil || !slices.Equal(got, []string{"/", "/d/sbx b/ws"}) {
		t.Errorf("Parse = %q, %v", got, err)
	}
	if mps, err := Read(); err != nil || !slices.Contains(mps, "/") {
		t.Errorf("Read = %v, %v; want the root mount among them", mps, err)
	}
}

func TestParseMounts(t *testing.T) {
	t.Parallel()
	in := "22 1 8:1 / / ro,relatime shared:1 - ext4 /dev/root rw\n" +
		"23 22 0:5 / /dev/shm rw,nosuid - tmpfs shm rw\n" +
		"24 22 0:6 / /my\\040dir rw - 9p none rw\n" +
		"short line\n"
	got, err := ParseMounts(strings.NewReader(in))
	want := []Mount{{"/", "ext4", false}, {"/dev/shm", "tmpfs", true}, {"/my dir", "9p", true}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("ParseMounts = %+v, %v; want %+v", got, err, want)
	}
}
