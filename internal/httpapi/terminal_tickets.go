package httpapi

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"time"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/errdefs"
)

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
	token, exp, err := s.tickets.Issue(principalOf(r).Tenant, sha256.Sum256([]byte(key)), sb.ID, time.Now())
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
		tk, ok := s.tickets.Redeem(token, r.PathValue("id"), time.Now())
		if !ok {
			s.writeProblem(w, r, errdefs.WithCode("invalid_ticket", fmt.Errorf(
				"the terminal ticket is unknown, used, expired or for another sandbox; ask POST /v1/sandboxes/{id}/terminal/tickets for a new one: %w", errdefs.ErrUnauthenticated)))
			return
		}
		// The issuer is checked again as the ticket is used: its key still
		// valid, an admin's still an admin's; the terminal then attaches
		// as the ticket's tenant, so a sandbox no longer that tenant's is
		// not found.
		p, err := s.auth.Reissued(r.Context(), tk.Key, tk.Tenant, "terminal ticket for sandbox "+tk.Sandbox)
		if err != nil {
			s.writeProblem(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey, p)))
	})
}
