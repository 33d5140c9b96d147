package testenv

import (
	"path/filepath"
	"sync"
	"testing"
)

var egressBin struct {
	once sync.Once
	dir  string
	err  error
}

// EgressBinary builds ./cmd/genesis-egress (static, CGO_ENABLED=0) once per
// test binary and returns the path of the binary, installed by hash like
// AgentDir's, so it can be bind-mounted into the gateway container or run
// as a process.
func EgressBinary(t testing.TB) string {
	t.Helper()
	egressBin.once.Do(func() { egressBin.dir, egressBin.err = buildStatic(ModuleRoot(t), "genesis-egress", "egress") })
	if egressBin.err != nil {
		t.Fatalf("build genesis-egress: %v", egressBin.err)
	}
	return filepath.Join(egressBin.dir, "genesis-egress")
}
