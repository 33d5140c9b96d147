package browser

import "testing"

// TestActionTable: every action of the vocabulary has exactly one
// handler, on the session (tabs) or on the page, and only a page action
// answers an image or loads a URL.
func TestActionTable(t *testing.T) {
	t.Parallel()
	for name, k := range actions {
		if (k.tab == nil) == (k.page == nil) {
			t.Errorf("action %s: want exactly one of a tab and a page handler", name)
		}
		if k.tab != nil && (k.image || k.loads || k.changes) {
			t.Errorf("action %s: a tab action marked as a page's (image %v, loads %v, changes %v)", name, k.image, k.loads, k.changes)
		}
	}
}
