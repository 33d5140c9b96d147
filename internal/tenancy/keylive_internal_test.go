package tenancy

import (
	"testing"
	"time"
)

// TestKeyLiveCache: live answers last KeyLiveTTL, others for good; forget
// drops a key's or a tenant's live answers, and an answer read before a
// forget is not remembered after it.
func TestKeyLiveCache(t *testing.T) {
	t.Parallel()
	var c keyLiveCache
	now := time.Unix(1_800_000_000, 0)
	a, b := keyRef{"t", "key_a"}, keyRef{"t", "key_b"}
	if _, known, _ := c.lookup(a, now); known {
		t.Fatal("known before anything was read")
	}
	_, _, gen := c.lookup(a, now)
	c.remember(a, true, gen, now)
	if live, known, _ := c.lookup(a, now.Add(KeyLiveTTL-time.Millisecond)); !live || !known {
		t.Error("a live answer forgotten within KeyLiveTTL")
	}
	if _, known, _ := c.lookup(a, now.Add(KeyLiveTTL)); known {
		t.Error("a live answer kept for KeyLiveTTL or longer")
	}
	if _, known, _ := c.lookup(a, now.Add(-time.Second)); known {
		t.Error("a live answer used before it was read (the clock went back)")
	}
	c.remember(b, false, gen, now)
	if live, known, _ := c.lookup(b, now.Add(time.Hour)); live || !known {
		t.Error("a dead answer not kept")
	}

	c.forget("t", "key_a")
	if _, known, _ := c.lookup(a, now); known {
		t.Error("forget kept the key")
	}
	// A read that started before the forget is not remembered.
	c.remember(a, true, gen, now)
	if _, known, _ := c.lookup(a, now); known {
		t.Error("an answer read before a forget was remembered")
	}
	_, _, gen = c.lookup(a, now)
	c.remember(a, true, gen, now)
	c.forget("t", "")
	if _, known, _ := c.lookup(a, now); known {
		t.Error("forgetting the tenant kept its key")
	}
}
