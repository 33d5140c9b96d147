package policy_test

import (
	"fmt"
	"testing"

	"genesis.dev/sandbox/internal/policy"
)

// TestRiskPolicyListsFoundRuntimes: the risk policy names the runtimes the
// probe found, weakest first, and a level nothing found isolates enough
// gets none (no kata-* where no kata runtime is).
func TestRiskPolicyListsFoundRuntimes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		found []string
		want  string
	}{
		{[]string{"runsc", "runc"}, "map[high:[runsc] low:[runc runsc] medium:[runsc] trusted:[runc runsc] untrusted:[runsc]]"},
		{[]string{"runc"}, "map[high:[] low:[runc] medium:[] trusted:[runc] untrusted:[]]"},
		{[]string{"kata-qemu", "runc", "runsc"}, "map[high:[runsc kata-qemu] low:[runc runsc kata-qemu] medium:[runsc kata-qemu] trusted:[runc runsc kata-qemu] untrusted:[runsc kata-qemu]]"},
	} {
		if got := fmt.Sprint(policy.RiskPolicy(c.found)); got != c.want {
			t.Errorf("found %v: %s, want %s", c.found, got, c.want)
		}
	}
}
