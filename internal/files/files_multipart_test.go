package files

import (
	"errors"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/errdefs"
)

func TestUploadTarget(t *testing.T) {
	t.Parallel()
	roots := []string{"/workspace", "/tmp"}
	for _, c := range []struct{ dir, name, want string }{
		{"/workspace/up", "a.txt", "/workspace/up/a.txt"},
		{"/workspace/up", "sub/./b", "/workspace/up/sub/b"},
		{"/workspace/up", "sub/../c", "/workspace/up/c"},
		{"/workspace", "new\nline", "/workspace/new\nline"},
		{"/tmp", "x", "/tmp/x"},
		{"/workspace/up", "", ""},
		{"/workspace/up", ".", ""},
		{"/workspace/up", "..", ""},
		{"/workspace/up", "../x", ""},
		{"/workspace/up", "a/../../x", ""},
		{"/workspace/up", "/etc/passwd", ""},
		{"/workspace", "a\xffb", ""},
		{"/workspace", "a\x00b", ""},
		{"/workspace", strings.Repeat("n", 300), ""},
	} {
		got, err := uploadTarget(roots, 256, c.dir, c.name)
		if c.want == "" {
			if !errors.Is(err, errdefs.ErrInvalidArgument) {
				t.Errorf("uploadTarget(%q, %q) = %q, %v; want invalid argument", c.dir, c.name, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("uploadTarget(%q, %q) = %q, %v; want %q", c.dir, c.name, got, err, c.want)
		}
	}
}
