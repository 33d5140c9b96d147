package apiwire

import (
	"path/filepath"
	"reflect"
	"testing"

	"genesis.dev/sandbox/internal/store/sqlite"
	"genesis.dev/sandbox/internal/volumes"
)

// TestVolumesCapability: without volumes the capability says unsupported
// and why; with a manager it shows its roots and limits, and whether this
// host can make volumes (with a reason exactly when it cannot).
func TestVolumesCapability(t *testing.T) {
	t.Parallel()
	none := VolumesCapability(nil)
	if none.Supported || none.Reason == "" || none.Roots == nil || len(none.Roots) != 0 || none.MaxSizeMB != 0 {
		t.Errorf("no volumes: %+v, want unsupported with a reason and no roots", none)
	}
	st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "state.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m, err := volumes.New(volumes.Config{Store: st, Dir: filepath.Join(t.TempDir(), "volumes"), MaxSizeMB: 2048, MaxMBPerTenant: 4096, MaxPerTenant: 3,
		Roots: []string{"/mnt/data", "/workspace"}})
	if err != nil {
		t.Fatal(err)
	}
	got := VolumesCapability(m)
	ok, why := m.Available()
	if got.Supported != ok || (got.Reason != "") == ok || ok && got.Reason != "" || !ok && got.Reason != why {
		t.Errorf("supported %v reason %q; the manager says %v %q", got.Supported, got.Reason, ok, why)
	}
	if !reflect.DeepEqual(got.Roots, []string{"/mnt/data", "/workspace"}) || got.MaxSizeMB != 2048 || got.MaxMBPerTenant != 4096 || got.MaxPerTenant != 3 {
		t.Errorf("roots and limits: %+v", got)
	}
}
