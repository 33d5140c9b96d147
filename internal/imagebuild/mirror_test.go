package imagebuild

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"genesis.dev/sandbox/internal/errdefs"
)

func TestMirrorFromDeb822(t *testing.T) {
	t.Parallel()
	const sources = `Types: deb
# a comment
URIs: http://deb.example.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://security.example.org/debian-security
Suites: bookworm-security
Components: main
`
	cases := []struct {
		name, data, suite, want string
	}{
		{"main suite", sources, "bookworm", "http://deb.example.org/debian"},
		{"security suite", sources, "bookworm-security", "http://security.example.org/debian-security"},
		{"absent suite", sources, "trixie", ""},
		{"deb-src only", "Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n", "bookworm", ""},
		{"disabled", "Enabled: no\nTypes: deb\nURIs: http://off.example/debian\nSuites: bookworm\n", "bookworm", ""},
		{"cdrom skipped", "Types: deb\nURIs: cdrom:[x]/ https://b.example/debian\nSuites: bookworm\n", "bookworm", "https://b.example/debian"},
		{"crlf and blank-space separator", "Types: deb\r\nURIs: http://a.example/d\r\nSuites: sid\r\n  \r\nTypes: deb\r\nURIs: http://b.example/d\r\nSuites: bookworm\r\n", "bookworm", "http://b.example/d"},
		{"continuation", "Types: deb\nURIs:\n http://c.example/debian\nSuites: bookworm\n", "bookworm", "http://c.example/debian"},
	}
	for _, c := range cases {
		if got := mirrorFromDeb822([]byte(c.data), c.suite); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

func TestMirrorFromOneLine(t *testing.T) {
	t.Parallel()
	const list = `# deb http://commented.example/debian bookworm main
deb-src http://src.example/debian bookworm main
deb [arch=amd64 signed-by=/k.gpg] http://opts.example/debian bookworm main contrib
deb http://plain.example/debian trixie main
`
	cases := []struct{ suite, want string }{
		{"bookworm", "http://opts.example/debian"},
		{"trixie", "http://plain.example/debian"},
		{"sid", ""},
	}
	for _, c := range cases {
		if got := mirrorFromOneLine([]byte(list), c.suite); got != c.want {
			t.Errorf("%s: got %q, want %q", c.suite, got, c.want)
		}
	}
}

func TestAptSourcesMirror(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sources.list.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := aptSourcesMirror(dir, "bookworm"); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("no sources: error = %v, want ErrFailedPrecondition", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sources.list"), []byte("deb http://list.example/debian bookworm main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := aptSourcesMirror(dir, "bookworm"); err != nil || got != "http://list.example/debian" {
		t.Fatalf("sources.list: got %q, %v", got, err)
	}
	// deb822 files take precedence.
	if err := os.WriteFile(filepath.Join(dir, "sources.list.d", "debian.sources"),
		[]byte("Types: deb\nURIs: http://deb822.example/debian\nSuites: bookworm\nComponents: main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := aptSourcesMirror(dir, "bookworm"); err != nil || got != "http://deb822.example/debian" {
		t.Fatalf("deb822: got %q, %v", got, err)
	}
	// A Debian release the sources do not list comes from the archive of
	// one they do; a suite that is no Debian release does not.
	if got, err := aptSourcesMirror(dir, "trixie"); err != nil || got != "http://deb822.example/debian" {
		t.Fatalf("trixie from a bookworm archive: got %q, %v", got, err)
	}
	if _, err := aptSourcesMirror(dir, "jammy"); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("jammy: error = %v, want ErrFailedPrecondition", err)
	}
}
