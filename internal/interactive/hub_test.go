package interactive

import (
	"bytes"
	"testing"
)

// TestHubRoles checks the one-writer rule: the first connection writes,
// later ones observe, a takeover moves the pen, and a writer that leaves
// leaves the stream without a writer.
func TestHubRoles(t *testing.T) {
	t.Parallel()
	h := NewHub()
	var in1, in2, in3 bytes.Buffer
	c1 := h.Join("k", &in1, false)
	c2 := h.Join("k", &in2, false)
	if !c1.Writer() || c2.Writer() {
		t.Fatalf("writer flags %v %v, want first only", c1.Writer(), c2.Writer())
	}
	if ok, err := c2.Input([]byte("x")); ok || err != nil || in2.Len() != 0 {
		t.Fatalf("observer input went through: %v %v", ok, err)
	}
	if ok, err := c1.Input([]byte("a")); !ok || err != nil || in1.String() != "a" {
		t.Fatalf("writer input: %v %v %q", ok, err, in1.String())
	}
	<-c1.RoleChanged() // became writer at join
	c2.Takeover()
	select {
	case <-c1.RoleChanged():
	default:
		t.Fatal("the demoted writer was not told")
	}
	if c1.Writer() || !c2.Writer() {
		t.Fatalf("after takeover: %v %v", c1.Writer(), c2.Writer())
	}
	c3 := h.Join("k", &in3, true)
	if !c3.Writer() || c2.Writer() {
		t.Fatal("a joining takeover did not take the pen")
	}
	if !c3.Leave() || c3.Leave() {
		t.Fatal("Leave is not idempotent")
	}
	if c1.Writer() || c2.Writer() {
		t.Fatal("a writer that left handed the pen on")
	}
	c3.Takeover()
	if c3.Writer() {
		t.Fatal("a connection that left took over")
	}
	if n := h.Members("k"); n != 2 {
		t.Fatalf("%d members, want 2", n)
	}
	c1.Leave()
	c2.Leave()
	if n := h.Members("k"); n != 0 || len(h.groups) != 0 {
		t.Fatalf("empty stream kept: %d members, %d groups", n, len(h.groups))
	}
	if other := h.Join("other", &in1, false); !other.Writer() {
		t.Fatal("streams share roles")
	}
}
