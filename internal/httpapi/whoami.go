package httpapi

import (
	"net/http"

	"genesis.dev/sandbox/internal/apiwire"
)

// whoami serves GET /v1/whoami: the tenant of the caller's key and whether
// it may use the admin API (so a client such as the console can show the
// admin views without probing an admin route for a 403).
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, apiwire.Whoami(principalOf(r)))
}
