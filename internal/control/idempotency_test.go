package control_test

import (
	"sync"
	"testing"

	"genesis.dev/sandbox/internal/control"
)

// TestCreateIdempotencyKey: retries with the same key (also concurrent ones)
// get the same sandbox and make exactly one container; another tenant's
// identical key is independent.
func TestCreateIdempotencyKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	first := h.Create("a", control.CreateSandboxInput{IdempotencyKey: "retry-me"})
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i] = h.Create("a", control.CreateSandboxInput{IdempotencyKey: "retry-me"}).ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != first.ID {
			t.Fatalf("retry got %s, want %s", id, first.ID)
		}
	}
	other := h.Create("b", control.CreateSandboxInput{IdempotencyKey: "retry-me"})
	if other.ID == first.ID {
		t.Fatal("tenants share idempotency keys")
	}
	fresh := h.Create("a", control.CreateSandboxInput{IdempotencyKey: "another"})
	if fresh.ID == first.ID {
		t.Fatal("different keys gave the same sandbox")
	}
	if n := len(h.Containers()); n != 3 {
		t.Fatalf("%d containers, want 3 (one per distinct tenant+key)", n)
	}
}
