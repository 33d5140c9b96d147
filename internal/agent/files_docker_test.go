package agent_test

import (
	"slices"
	"testing"

	"genesis.dev/sandbox/internal/agent/agentproto"
	"genesis.dev/sandbox/internal/errdefs"
)

// TestFilesInContainers runs the file operations and the escape attempts
// against the agent as PID 1 of a locked-down container, as the sandbox
// user, under runc and runsc: root /workspace, the outside target /tmp (a
// directory the sandbox user may write, so a write escape would show).
func TestFilesInContainers(t *testing.T) {
	for _, rt := range []string{"runc", "runsc"} {
		t.Run(rt, func(t *testing.T) {
			t.Parallel()
			if !slices.Contains(runtimesUnderTest(t), rt) {
				t.Skipf("docker runtime %s not configured", rt)
			}
			c := startContainer(t, rt)
			e := &fileEnv{c: c.client, root: "/workspace", outside: "/tmp"}
			t.Run("operations", func(t *testing.T) { testFileOperations(t, e) })
			t.Run("escapes", func(t *testing.T) { testFileEscapes(t, e) })
			t.Run("device", func(t *testing.T) {
				// The sandbox user cannot mknod; a link to a device is the
				// way in, and it leads out of the root.
				e.sh(t, "ln -s /dev/zero /workspace/zero")
				_, _, _, err := readAll(t, e.c, "/workspace/zero", nil)
				wantCode(t, "read link to /dev/zero", err, errdefs.ErrInvalidArgument, agentproto.CodePathOutsideRoot)
			})
		})
	}
}
