package snapshots

import (
	"errors"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// TestMemoryDecision: memory is taken where the runtime keeps it and the
// sandbox has no network; asking for it otherwise is 501
// memory_checkpoint_unsupported that names the actual cause — the runtime's
// reason, or the sandbox's network (never "runsc keeps files only").
func TestMemoryDecision(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	keeps := driver.Feature{Supported: true, Method: "runsc checkpoint"}
	files := driver.Feature{Reason: "runc keeps no processes or memory here"}
	plain := &sandbox.Sandbox{ID: "sbx_a", Runtime: sandbox.RuntimeRunsc}
	networked := &sandbox.Sandbox{ID: "sbx_b", Runtime: sandbox.RuntimeRunsc, Network: &sandbox.NetworkSummary{Mode: "allowlist"}}
	runc := &sandbox.Sandbox{ID: "sbx_c", Runtime: sandbox.RuntimeRunc}
	tests := []struct {
		name   string
		sb     *sandbox.Sandbox
		mem    driver.Feature
		asked  *bool
		want   bool
		detail []string // the error's detail holds each; none: no error
		absent string   // and never this
	}{
		{name: "runsc default", sb: plain, mem: keeps, want: true},
		{name: "runsc asked", sb: plain, mem: keeps, asked: &yes, want: true},
		{name: "runsc files only", sb: plain, mem: keeps, asked: &no, want: false},
		{name: "networked default", sb: networked, mem: keeps, want: false},
		{name: "networked asked", sb: networked, mem: keeps, asked: &yes,
			detail: []string{"sbx_b has a network (mode allowlist)", "connections cannot move", "memory: false"}, absent: "runs under runsc, which keeps files only"},
		{name: "runc default", sb: runc, mem: files, want: false},
		{name: "runc asked", sb: runc, mem: files, asked: &yes,
			detail: []string{"runs under runc, which keeps files only", files.Reason, "memory: false"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := memoryDecision(tc.sb, tc.mem, tc.asked)
			if len(tc.detail) == 0 {
				if err != nil || got != tc.want {
					t.Fatalf("got %v, %v; want %v", got, err, tc.want)
				}
				return
			}
			if err == nil || !errors.Is(err, errdefs.ErrNotImplemented) || errdefs.Code(err) != "memory_checkpoint_unsupported" {
				t.Fatalf("got %v, %v; want 501 memory_checkpoint_unsupported", got, err)
			}
			d := errdefs.Detail(err)
			for _, w := range tc.detail {
				if !strings.Contains(d, w) {
					t.Errorf("detail %q lacks %q", d, w)
				}
			}
			if tc.absent != "" && strings.Contains(d, tc.absent) {
				t.Errorf("detail %q says %q", d, tc.absent)
			}
		})
	}
}
