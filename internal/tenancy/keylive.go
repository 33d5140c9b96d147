package tenancy

import (
	"context"
	"fmt"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/tenant"
)

// CodeTokenRevoked is the problem code of a data-plane token (a preview,
// browser or display link, an E2B or OpenSandbox sandbox token) whose API
// key is revoked or whose key's tenant is gone.
const CodeTokenRevoked = "token_revoked"

// KeyLiveTTL bounds how long KeyLive answers "live" from memory. A
// revocation (or a tenant deletion) made through this instance takes
// effect at once; one made through another instance sharing the store
// within KeyLiveTTL.
const KeyLiveTTL = time.Second

// maxKeyLiveEntries bounds each of the cache's maps; a full map is emptied
// (its entries only save store reads).
const maxKeyLiveEntries = 10_000

// KeyLive answers nil while the API key keyID of keyTenant may still act:
// a key from the config or the command line while it is configured (for
// that tenant), a stored key while it is not revoked and its tenant
// exists. Otherwise it is errdefs.ErrUnauthenticated with code
// token_revoked; a store failure is returned as it is. It is the check
// every data-plane token makes at each use, so it reads the store at most
// once per key per KeyLiveTTL.
func (s *Service) KeyLive(ctx context.Context, keyTenant, keyID string) error {
	revoked := func() error {
		return errdefs.WithCode(CodeTokenRevoked, fmt.Errorf(
			"the API key %.40q that this token was made with is revoked or its tenant is gone; make a new one with a live key: %w",
			keyID, errdefs.ErrUnauthenticated))
	}
	if keyTenant == "" || keyID == "" {
		return revoked()
	}
	if tenant.IsConfigKeyID(keyID) {
		if t, ok := s.configKeys[keyID]; ok && t == keyTenant {
			return nil
		}
		return revoked()
	}
	ref := keyRef{tenant: keyTenant, id: keyID}
	now := s.now()
	live, known, gen := s.keyLive.lookup(ref, now)
	if known {
		if live {
			return nil
		}
		return revoked()
	}
	keys, err := s.store.ListKeys(ctx, keyTenant) // none when the tenant is gone: its keys go with it
	if err != nil {
		return fmt.Errorf("checking API key %s: %w", keyID, err)
	}
	live = false
	for _, k := range keys {
		if k.ID == keyID {
			live = !k.Revoked()
			break
		}
	}
	s.keyLive.remember(ref, live, gen, now)
	if !live {
		return revoked()
	}
	return nil
}

type keyRef struct{ tenant, id string }

// keyLiveCache remembers KeyLive's answers: live ones for KeyLiveTTL, the
// others for good (a revoked key stays revoked; a key id is never used
// again).
type keyLiveCache struct {
	mu sync.Mutex
	// gen counts forget calls: an answer read from the store before one is
	// not remembered after it.
	gen  uint64
	live map[keyRef]time.Time // when the key was read live
	dead map[keyRef]struct{}
}

// lookup answers what is known of ref at now, and the generation to give
// remember.
func (c *keyLiveCache) lookup(ref keyRef, now time.Time) (live, known bool, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.dead[ref]; ok {
		return false, true, c.gen
	}
	if at, ok := c.live[ref]; ok && now.Sub(at) < KeyLiveTTL && !now.Before(at) {
		return true, true, c.gen
	}
	return false, false, c.gen
}

// remember keeps an answer read at now, unless a forget came since gen.
func (c *keyLiveCache) remember(ref keyRef, live bool, gen uint64, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if live && gen != c.gen {
		return
	}
	if live {
		if c.live == nil || len(c.live) >= maxKeyLiveEntries {
			c.live = map[keyRef]time.Time{}
		}
		c.live[ref] = now
		return
	}
	delete(c.live, ref)
	if c.dead == nil || len(c.dead) >= maxKeyLiveEntries {
		c.dead = map[keyRef]struct{}{}
	}
	c.dead[ref] = struct{}{}
}

// forget drops what is remembered of key id of tenant, or of every key of
// tenant when id is "": the next KeyLive reads the store.
func (c *keyLiveCache) forget(tenant, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for ref := range c.live {
		if ref.tenant == tenant && (id == "" || ref.id == id) {
			delete(c.live, ref)
		}
	}
}
