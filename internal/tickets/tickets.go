package tickets

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
)

// A browser cannot set an Authorization header on a WebSocket, and an API
// key must never travel in a URL (it would sit in logs and history). So a
// browser first asks, with its key in the header, for a terminal ticket:
// a random token that opens one sandbox's terminal WebSocket once, within
// TTL, as the caller who asked for it. The ticket goes in the
// WebSocket URL (?ticket=); it is useless after its first use or after its
// short life.

// Ticket limits.
const (
	// TTL is a ticket's life.
	TTL = 30 * time.Second
	// DefaultMax bounds the outstanding tickets of the service.
	DefaultMax = 10000
	// DefaultPerTenant bounds the outstanding tickets of one tenant, so
	// that no tenant can take the whole table.
	DefaultPerTenant = 100
)

// Ticket remembers the SHA-256 of the key that asked, so that the
// key is resolved again when the ticket is used: a key revoked meanwhile
// does not open the terminal. It also remembers the tenant it was issued
// for, which differs from the key's own when an admin acts for a tenant
// (X-Genesis-Tenant).
type Ticket struct {
	Key     [32]byte
	Tenant  string
	Sandbox string
	Expires time.Time
}

// Table holds the outstanding tickets by the SHA-256 of their token (the
// tokens themselves are not kept), at most Max of them and at most
// PerTenant of one tenant's (0: the defaults above). Its zero value is
// ready to use.
type Table struct {
	Max, PerTenant int

	mu       sync.Mutex
	m        map[[32]byte]Ticket
	byTenant map[string]int
}

// Issue makes a ticket for tenant (asked with a key whose SHA-256 is key) to open
// sandbox's terminal until now+TTL. A tenant over its share is refused
// with 429 too_many_tickets and a Retry-After of when its oldest ticket
// expires. When the whole table is full, the oldest ticket of the tenant
// holding the most gives way, unless that tenant is the asker: one tenant's
// tickets never lock another out.
func (t *Table) Issue(tenant string, key [32]byte, sandbox string, now time.Time) (string, time.Time, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m, t.byTenant = map[[32]byte]Ticket{}, map[string]int{}
	}
	maxAll, perTenant := cmp.Or(t.Max, DefaultMax), cmp.Or(t.PerTenant, DefaultPerTenant)
	for k, v := range t.m {
		if !now.Before(v.Expires) {
			t.drop(k, v)
		}
	}
	full := func(why string, n int) error {
		retry := TTL
		for _, v := range t.m {
			if v.Tenant == tenant {
				retry = min(retry, v.Expires.Sub(now))
			}
		}
		return errdefs.WithRetryAfter(retry, errdefs.WithCode("too_many_tickets", fmt.Errorf(
			"%d terminal tickets of tenant %s are outstanding (%s); each is good for %s or one use: %w",
			n, tenant, why, TTL, errdefs.ErrResourceExhausted)))
	}
	if n := t.byTenant[tenant]; n >= perTenant {
		return "", time.Time{}, full(fmt.Sprintf("at most %d per tenant", perTenant), n)
	}
	if len(t.m) >= maxAll {
		top, most := "", 0
		for ten, n := range t.byTenant {
			if n > most || (n == most && ten < top) {
				top, most = ten, n
			}
		}
		if top == tenant {
			return "", time.Time{}, full(fmt.Sprintf("the service holds at most %d", maxAll), most)
		}
		var oldest [32]byte
		var ov Ticket
		for k, v := range t.m {
			if v.Tenant == top && (ov.Tenant == "" || v.Expires.Before(ov.Expires)) {
				oldest, ov = k, v
			}
		}
		t.drop(oldest, ov)
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	token := "tkt_" + base64.RawURLEncoding.EncodeToString(b[:])
	exp := now.Add(TTL)
	t.m[sha256.Sum256([]byte(token))] = Ticket{Key: key, Tenant: tenant, Sandbox: sandbox, Expires: exp}
	t.byTenant[tenant]++
	return token, exp, nil
}

// drop forgets the ticket k (v); t.mu is held.
func (t *Table) drop(k [32]byte, v Ticket) {
	delete(t.m, k)
	if t.byTenant[v.Tenant]--; t.byTenant[v.Tenant] <= 0 {
		delete(t.byTenant, v.Tenant)
	}
}

// Redeem consumes token for sandbox: it answers the ticket, once. A ticket
// given for another sandbox is consumed too.
func (t *Table) Redeem(token, sandbox string, now time.Time) (Ticket, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := sha256.Sum256([]byte(token))
	v, ok := t.m[k]
	if !ok {
		return Ticket{}, false
	}
	t.drop(k, v)
	if v.Sandbox != sandbox || !now.Before(v.Expires) {
		return Ticket{}, false
	}
	return v, true
}
