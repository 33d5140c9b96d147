package skills

import "testing"

// TestFileContentType: SKILL.md and scripts are served as text, other
// files by extension, the rest as bytes.
func TestFileContentType(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]string{
		"SKILL.md":           "text/plain; charset=utf-8",
		"scripts/run.py":     "text/plain; charset=utf-8",
		"scripts/setup.sh":   "text/plain; charset=utf-8",
		"data/table.json":    "application/json",
		"bin/tool":           "application/octet-stream",
		"dir.v2/noextension": "application/octet-stream",
	} {
		if got := FileContentType(p); got != want {
			t.Errorf("FileContentType(%q) = %q, want %q", p, got, want)
		}
	}
}
