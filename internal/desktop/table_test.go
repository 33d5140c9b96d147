package desktop

import "testing"

// TestActionTable: every action of the vocabulary runs, and an alias
// names an action of the table that is its own kind.
func TestActionTable(t *testing.T) {
	t.Parallel()
	for name, k := range actions {
		if k.run == nil {
			t.Errorf("action %s has no run", name)
		}
		target, ok := actions[k.kind]
		if !ok || target.kind != k.kind {
			t.Errorf("action %s becomes step %q, which is not an action of its own kind", name, k.kind)
		}
		if k.looks && k.launches {
			t.Errorf("action %s both only looks and launches", name)
		}
	}
}
