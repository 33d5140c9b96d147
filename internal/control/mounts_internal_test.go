package control

import (
	"testing"
)

func TestReadOnlyMounts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		dirs map[string]string
		ok   bool
	}{
		{"skill", map[string]string{"/skill": dir}, true},
		{"nested new path", map[string]string{"/opt/skill": dir}, true},
		{"workspace", map[string]string{"/workspace": dir}, false},
		{"below the workspace", map[string]string{"/workspace/x": dir}, false},
		{"the root", map[string]string{"/": dir}, false},
		{"above the agent", map[string]string{"/run": dir}, false},
		{"below /etc", map[string]string{"/etc/passwd": dir}, false},
		{"relative target", map[string]string{"skill": dir}, false},
		{"unclean target", map[string]string{"/skill/../etc": dir}, false},
		{"relative source", map[string]string{"/skill": "x"}, false},
		{"missing source", map[string]string{"/skill": dir + "/none"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := readOnlyMounts(tc.dirs)
			if tc.ok != (err == nil) {
				t.Fatalf("readOnlyMounts(%v) = %v, %v", tc.dirs, m, err)
			}
			if tc.ok && (len(m) != 1 || !m[0].ReadOnly) {
				t.Errorf("mounts = %+v, want one read-only", m)
			}
		})
	}
}
