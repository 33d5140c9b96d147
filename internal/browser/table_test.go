package browser

import (
	"context"
	"errors"
	"testing"

	"genesis.dev/sandbox/api"
)

// TestActionTable: every action of the vocabulary has exactly one
// handler, on the session (tabs) or on the page, and only a page action
// answers an image or loads a URL; an action that only reads the page
// changes nothing.
func TestActionTable(t *testing.T) {
	t.Parallel()
	for name, k := range actions {
		if (k.tab == nil) == (k.page == nil) {
			t.Errorf("action %s: want exactly one of a tab and a page handler", name)
		}
		if k.reads && (k.changes || k.loads || k.types) {
			t.Errorf("action %s: marked as one that only reads, and as one that changes the page", name)
		}
		if k.tab != nil && (k.image || k.loads || k.changes) {
			t.Errorf("action %s: a tab action marked as a page's (image %v, loads %v, changes %v)", name, k.image, k.loads, k.changes)
		}
	}
}

// TestReadsOnly: a full-page screenshot, which resizes the view while it
// captures, waits for a pending trace screenshot as a change would.
func TestReadsOnly(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a    api.BrowserAction
		want bool
	}{
		{api.BrowserAction{Type: "screenshot"}, true},
		{api.BrowserAction{Type: "screenshot", FullPage: true}, false},
		{api.BrowserAction{Type: "text"}, true},
		{api.BrowserAction{Type: "tabs"}, true},
		{api.BrowserAction{Type: "evaluate", Expression: "1"}, false},
		{api.BrowserAction{Type: "click", Selector: "#b"}, false},
		{api.BrowserAction{Type: "tab_switch", Tab: "x"}, false},
	} {
		if got := actions[c.a.Type].readsOnly(c.a); got != c.want {
			t.Errorf("%+v: readsOnly %v, want %v", c.a, got, c.want)
		}
	}
}

// TestWaitShot: an action that may change the page waits for the trace's
// pending screenshot, and gives up when its request ends.
func TestWaitShot(t *testing.T) {
	t.Parallel()
	s := &session{}
	if err := s.waitShot(context.Background()); err != nil {
		t.Fatalf("nothing pending: %v", err)
	}
	pending := make(chan struct{})
	s.pendingShot = pending
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.waitShot(ended); !errors.Is(err, context.Canceled) || s.pendingShot == nil {
		t.Fatalf("an ended request: %v (pending %v), want context.Canceled and the capture still pending", err, s.pendingShot != nil)
	}
	close(pending)
	if err := s.waitShot(context.Background()); err != nil || s.pendingShot != nil {
		t.Fatalf("a captured screenshot: %v (pending %v)", err, s.pendingShot != nil)
	}
}
