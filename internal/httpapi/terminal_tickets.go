package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/errdefs"
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
)

// terminalTicket remembers the SHA-256 of the key that asked, so that the
// key is resolved again when the ticket is used: a key revoked meanwhile
// does not open the terminal.
type terminalTicket struct {
	key     [32]byte
	sandbox string
	expires time.Time
}

// terminalTickets holds the outstanding tickets by the SHA-256 of their
// token (the tokens themselves are not kept).
type terminalTickets struct {
	mu sync.Mutex
	m  map[[32]byte]terminalTicket
}

// issue makes a ticket for the key with SHA-256 key to open sandbox's
// terminal until now+TTL.
func (t *terminalTickets) issue(key [32]byte, sandbox string, now time.Time) (string, time.Time, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[[32]byte]terminalTicket{}
	}
	for k, v := range t.m {
		if !now.Before(v.expires) {
			delete(t.m, k)
		}
	}
	if len(t.m) >= terminalTicketsMax {
		return "", time.Time{}, errdefs.WithCode("too_many_tickets", fmt.Errorf(
			"%d terminal tickets are outstanding; try again in %s: %w", len(t.m), terminalTicketTTL, errdefs.ErrResourceExhausted))
	}
	var b [32]byte
	_, _ = rand.Read(b[:])
	token := "tkt_" + base64.RawURLEncoding.EncodeToString(b[:])
	exp := now.Add(terminalTicketTTL)
	t.m[sha256.Sum256([]byte(token))] = terminalTicket{key: key, sandbox: sandbox, expires: exp}
	return token, exp, nil
}

// redeem consumes token for sandbox: it answers the key it was issued to,
// once. A ticket given for another sandbox is consumed too.
func (t *terminalTickets) redeem(token, sandbox string, now time.Time) ([32]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := sha256.Sum256([]byte(token))
	v, ok := t.m[k]
	if !ok {
		return [32]byte{}, false
	}
	delete(t.m, k)
	if v.sandbox != sandbox || !now.Before(v.expires) {
		return [32]byte{}, false
	}
	return v.key, true
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
	key, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	token, exp, err := s.tickets.issue(sha256.Sum256([]byte(key)), sb.ID, time.Now())
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, api.TerminalTicket{Ticket: token, ExpiresAt: exp.UTC()})
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
		key, ok := s.tickets.redeem(token, r.PathValue("id"), time.Now())
		if !ok {
			s.writeProblem(w, r, errdefs.WithCode("invalid_ticket", fmt.Errorf(
				"the terminal ticket is unknown, used, expired or for another sandbox; ask POST /v1/sandboxes/{id}/terminal/tickets for a new one: %w", errdefs.ErrUnauthenticated)))
			return
		}
		p, err := s.resolveKey(r.Context(), key)
		if err != nil {
			s.writeProblem(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey, p)))
	})
}
