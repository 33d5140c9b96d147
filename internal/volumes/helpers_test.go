package volumes_test

import (
	osexec "os/exec"
	"testing"

	"genesis.dev/sandbox/internal/store"
)

func storeAll() store.VolumeFilter { return store.VolumeFilter{} }

func exec(t *testing.T, name string, args ...string) ([]byte, error) {
	t.Helper()
	return osexec.Command(name, args...).CombinedOutput()
}
