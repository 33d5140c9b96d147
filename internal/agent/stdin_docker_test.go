package agent_test

import (
	"slices"
	"testing"
)

// TestJobStdinInContainers streams into cat under runc and runsc.
func TestJobStdinInContainers(t *testing.T) {
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			if !slices.Contains(runtimesUnderTest(t), rt) {
				t.Skipf("docker runtime %s not configured", rt)
			}
			testStdinCat(t, startContainer(t, rt).client)
		})
	}
}
