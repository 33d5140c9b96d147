package httpapi

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/tenant"
)

// A browser cannot set an Authorization header on a WebSocket, and an API
// key must never travel in a URL (it would sit in logs and history). So a
// browser first asks, with its key in the header, for a terminal ticket:
// a random token that opens one sandbox's terminal WebSocket once, within
// terminalTicketTTL, as the caller who asked for it. The ticket goes in the
// WebSocket URL (?ticket=); it is useless after its first use or after its
// short life.

// Terminal ticket limits.
const (
	terminalTicketTTL = 30 * time.Second
	// terminalTicketsMax bounds the outstanding tickets of the service.
	terminalTicketsMax = 10000
	// terminalTicketsPerTenant bounds the outstanding tickets of one
	// tenant, so that no tenant can take the whole table.
	terminalTicketsPerTenant = 100
)

// terminalTicket remembers the SHA-256 of the key that asked, so that the
// key is resolved again when the ticket is used: a key revoked meanwhile
// does not open the terminal. It also remembers the tenant it was issued
// for, which differs from the key's own when an admin acts for a tenant
// (X-Genesis-Tenant).
type terminalTicket struct {
	key     [32]byte
	tenant  string
	sandbox string
	expires time.Time
}

// terminalTickets holds the outstanding tickets by the SHA-256 of their
// token (the tokens themselves are not kept), at most max of them and at
// most perTenant of one tenant's (0: the defaults above).
type terminalTickets struct {
	max, perTenant int

	mu       sync.Mutex
	m        map[[32]byte]terminalTicket
	byTenant map[string]int
}

// issue makes a ticket for p (whose key has SHA-256 key) to open
// sandbox's terminal until now+TTL. A tenant over its share is refused
// with 429 too_many_tickets and a Retry-After of when its oldest ticket
// expires. When the whole table is full, the oldest ticket of the tenant
// holding the most gives way, unless that tenant is p's own: one tenant's
// tickets never lock another out.
func (t *terminalTickets) issue(p tenant.Principal, key [32]byte, sandbox string, now time.Time) (string, time.Time, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m, t.byTenant = map[[32]byte]terminalTicket{}, map[string]int{}
	}
	maxAll, perTenant := cmp.Or(t.max, terminalTicketsMax), cmp.Or(t.perTenant, terminalTicketsPerTenant)
	for k, v := range t.m {
		if !now.Before(v.expires) {
			t.drop(k, v)
		}
	}
	full := func(why string, n int) error {
		retry := terminalTicketTTL
		for _, v := range t.m {
			if v.tenant == p.Tenant {
				retry = min(retry, v.expires.Sub(now))
			}
		}
		return errdefs.WithRetryAfter(retry, errdefs.WithCode("too_many_tickets", fmt.Errorf(
			"%d terminal tickets of tenant %s are outstanding (%s); each is good for %s or one use: %w",
			n, p.Tenant, why, terminalTicketTTL, errdefs.ErrResourceExhausted)))
	}
	if n := t.byTenant[p.Tenant]; n >= perTenant {
		return "", time.Time{}, full(fmt.Sprintf("at most %d per tenant", perTenant), n)
	}
	if len(t.m) >= maxAll {
		top, most := "", 0
		for ten, n := range t.byTenant {
			if n > most || (n == most && ten < top) {
				top, most = ten, n
			}
		}
		if top == p.Tenant {
			return "", time.Time{}, full(fmt.Sprintf("the service holds at most %d", maxAll), most)
		}
		var oldest [32]byte
		var ov terminalTicket
		for k, v := range t.m {
			if v.tenant == top && (ov.tenant == "" || v.expires.Before(ov.expires)) {
				oldest, ov = k, v
			}
		}
		t.drop(oldest, ov)
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	token := "tkt_" + base64.RawURLEncoding.EncodeToString(b[:])
	exp := now.Add(terminalTicketTTL)
	t.m[sha256.Sum256([]byte(token))] = terminalTicket{key: key, tenant: p.Tenant, sandbox: sandbox, expires: exp}
	t.byTenant[p.Tenant]++
	return token, exp, nil
}

// drop forgets the ticket k (v); t.mu is held.
func (t *terminalTickets) drop(k [32]byte, v terminalTicket) {
	delete(t.m, k)
	if t.byTenant[v.tenant]--; t.byTenant[v.tenant] <= 0 {
		delete(t.byTenant, v.tenant)
	}
}

// redeem consumes token for sandbox: it answers the ticket, once. A ticket
// given for another sandbox is consumed too.
func (t *terminalTickets) redeem(token, sandbox string, now time.Time) (terminalTicket, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := sha256.Sum256([]byte(token))
	v, ok := t.m[k]
	if !ok {
		return terminalTicket{}, false
	}
	t.drop(k, v)
	if v.sandbox != sandbox || !now.Before(v.expires) {
		return terminalTicket{}, false
	}
	return v, true
}

// terminalRoutes serves the terminal WebSocket (bearer key or ticket) and
// its ticket route.
func (s *Server) terminalRoutes() {
	s.handle("POST", "/v1/sandboxes/{id}/terminal/tickets", true, s.createTerminalTicket)
	const pattern = "/v1/sandboxes/{id}/terminal"
	s.routes = append(s.routes, Route{Method: "GET", Pattern: pattern, Auth: true})
	route := "GET " + pattern
	s.mux.Handle(route, s.metrics.instrument(route, s.ticketOrBearer(http.HandlerFunc(s.terminal))))
}

// createTerminalTicket serves POST /v1/sandboxes/{id}/terminal/tickets.
func (s *Server) createTerminalTicket(w http.ResponseWriter, r *http.Request) {
	sb, err := s.ctl.GetSandbox(r.Context(), tenantOf(r), r.PathValue("id"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	// The ticket is for the tenant the request acts for: an admin's
	// X-Genesis-Tenant is honoured when the ticket is used, too.
	key, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	token, exp, err := s.tickets.issue(principalOf(r), sha256.Sum256([]byte(key)), sb.ID, time.Now())
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, client.TerminalTicket{Ticket: token, ExpiresAt: exp.UTC()})
}

// ticketOrBearer authenticates with ?ticket= when it is given (consuming
// it), and with the Authorization header otherwise.
func (s *Server) ticketOrBearer(next http.Handler) http.Handler {
	bearer := s.authenticate(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := r.URL.Query().Get("ticket")
		if token == "" {
			bearer.ServeHTTP(w, r)
			return
		}
		tk, ok := s.tickets.redeem(token, r.PathValue("id"), time.Now())
		if !ok {
			s.writeProblem(w, r, errdefs.WithCode("invalid_ticket", fmt.Errorf(
				"the terminal ticket is unknown, used, expired or for another sandbox; ask POST /v1/sandboxes/{id}/terminal/tickets for a new one: %w", errdefs.ErrUnauthenticated)))
			return
		}
		p, err := s.redeemPrincipal(r.Context(), tk)
		if err != nil {
			s.writeProblem(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey, p)))
	})
}

// redeemPrincipal checks a ticket's issuer again as it is used: its key
// still valid (and the key's tenant still there); for a ticket an admin
// took acting for another tenant, the key still an admin's and that tenant
// still there. The terminal then attaches as the ticket's tenant, so a
// sandbox that is no longer that tenant's is not found.
func (s *Server) redeemPrincipal(ctx context.Context, tk terminalTicket) (tenant.Principal, error) {
	p, err := s.resolveKey(ctx, tk.key)
	if err != nil || tk.tenant == p.Tenant {
		return p, err
	}
	if !p.Admin {
		return tenant.Principal{}, errdefs.WithCode("admin_required", fmt.Errorf(
			"the ticket was issued to an admin key acting for tenant %s, and the key is no longer an admin's: %w", tk.tenant, errdefs.ErrPermissionDenied))
	}
	if _, err := s.ctl.GetTenant(ctx, tk.tenant); err != nil {
		return tenant.Principal{}, err
	}
	s.log.Info("terminal opened by an admin acting for a tenant", "key", p.KeyID, "key_tenant", p.Tenant, "tenant", tk.tenant, "sandbox", tk.sandbox)
	p.Tenant = tk.tenant
	return p, nil
}
