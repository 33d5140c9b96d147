package agent

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// readOwnOOMScoreAdj returns this process's oom_score_adj.
func readOwnOOMScoreAdj(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(oomScoreAdjPath)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestOOMScoreAdjForkRaisesAndRestores checks, on this process's own file,
// that fork runs start with the value raised and puts the old one back.
// Not parallel: it changes the test process's value.
func TestOOMScoreAdjForkRaisesAndRestores(t *testing.T) {
	var warned []error
	a, err := openOOMScoreAdj(oomScoreAdjPath, func(err error) { warned = append(warned, err) })
	if err != nil {
		t.Skipf("no usable %s: %v", oomScoreAdjPath, err)
	}
	defer a.close()
	if a.own >= shimOOMScoreAdj {
		t.Skipf("this process already runs at oom_score_adj %d", a.own)
	}
	own := readOwnOOMScoreAdj(t)
	for _, child := range []int{shimOOMScoreAdj, workloadOOMScoreAdj} {
		var during string
		pid, err := a.fork(child, func() (int, error) { during = readOwnOOMScoreAdj(t); return 42, nil })
		if pid != 42 || err != nil {
			t.Fatalf("fork returned %d, %v; want start's 42, nil", pid, err)
		}
		if want := strconv.Itoa(child); during != want {
			t.Errorf("value during start = %q, want %q", during, want)
		}
		if after := readOwnOOMScoreAdj(t); after != own {
			t.Errorf("value after start = %q, want %q back", after, own)
		}
	}
	// A child at or below the process's value starts unchanged.
	var during string
	a.fork(a.own, func() (int, error) { during = readOwnOOMScoreAdj(t); return 0, nil })
	if during != own {
		t.Errorf("value during a start at the own value = %q, want %q", during, own)
	}
	if len(warned) != 0 {
		t.Errorf("warnings: %v", warned)
	}
	// Without the file every child starts as the process is.
	var none *oomScoreAdj
	if pid, err := none.fork(workloadOOMScoreAdj, func() (int, error) { return 7, nil }); pid != 7 || err != nil {
		t.Errorf("nil fork returned %d, %v", pid, err)
	}
}
