package admission

import (
	"slices"
	"testing"
)

// TestHolds: a hold is given back once, by Release, by a second Hold of
// its id or by a Sweep that finds it not live; a Sweep judges only holds
// registered up to its mark.
func TestHolds(t *testing.T) {
	t.Parallel()
	released := map[string]int{}
	rel := func(name string) Release { return func() { released[name]++ } }
	var h Holds
	if h.Held("a") {
		t.Fatal("an empty Holds holds a")
	}
	h.Release("a") // nothing held: nothing happens
	h.Hold("a", rel("a1"))
	h.Hold("a", rel("a2"))
	if !h.Held("a") || released["a1"] != 1 || released["a2"] != 0 {
		t.Fatalf("after holding a twice: held %v, released %v; want held, a1 given back", h.Held("a"), released)
	}
	h.Release("a")
	h.Release("a")
	if h.Held("a") || released["a2"] != 1 {
		t.Fatalf("after releasing a twice: held %v, released %v; want a2 given back once", h.Held("a"), released)
	}
	h.Hold("b", rel("b"))
	h.Hold("c", rel("c"))
	mark := h.Mark()
	h.Hold("d", rel("d")) // after the mark: not judged
	leaked := h.Sweep(func(id string) bool { return id == "c" }, mark)
	if !slices.Equal(leaked, []string{"b"}) || released["b"] != 1 || released["c"] != 0 || released["d"] != 0 {
		t.Fatalf("sweep: leaked %v, released %v; want only b", leaked, released)
	}
	if h.Held("b") || !h.Held("c") || !h.Held("d") {
		t.Fatalf("after the sweep: b %v c %v d %v; want only c and d held", h.Held("b"), h.Held("c"), h.Held("d"))
	}
}
