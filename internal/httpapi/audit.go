package httpapi

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/tenant"
)

// auditEntry collects what the audit record of one mutating request needs
// from the layers below the root handler: authenticate fills principal,
// writeProblem fills code. A handler whose request ends in one store
// transaction may have the record written in it (stored, see
// storedAudit); the root handler then writes none.
type auditEntry struct {
	pattern   string
	principal tenant.Principal
	code      string
	stored    *tenant.AuditRecord
}

func auditOf(r *http.Request) *auditEntry {
	ae, _ := r.Context().Value(auditKey).(*auditEntry)
	return ae
}

// mutating reports whether requests of method are audited.
func mutating(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// recordAudit writes the one audit record of a mutating request: who
// (key id, or "anonymous"), tenant, action (method and route pattern, or
// "<method> (no route)"), target, result, request id and remote address.
func (s *Server) recordAudit(r *http.Request, pattern string, ae *auditEntry, sw *statusWriter) {
	if st := ae.stored; st != nil && st.Seq > 0 && st.Status == sw.status {
		return // written with the handler's transaction (another status, not expected, gets its own record)
	}
	rec := auditRecord(r, pattern, ae, sw.status, auditTarget(r, pattern, sw))
	if err := s.tenancy.RecordAudit(r.Context(), rec); err != nil {
		s.log.Error("writing audit record", "request_id", rec.RequestID, "action", rec.Action, "err", err)
	}
}

// auditRecord is the audit record of r answered with status.
func auditRecord(r *http.Request, pattern string, ae *auditEntry, status int, target string) *tenant.AuditRecord {
	action := pattern
	if action == "" {
		action = r.Method + " (no route)"
	}
	rec := &tenant.AuditRecord{
		Actor: ae.principal.KeyID, Tenant: ae.principal.Tenant, Action: action, Target: target,
		Status: status, RequestID: requestID(r), Remote: r.RemoteAddr,
	}
	if rec.Actor == "" {
		rec.Actor = tenant.ActorAnonymous
	}
	if status >= 400 {
		rec.Code = ae.code
	}
	return rec
}

// storedAudit is the audit record r will have if it is answered with
// status, for a handler to have written in the transaction that decides
// the answer (its store sets Seq once committed; its target is for the
// handler to fill); nil when r is not audited. The root handler writes no
// other record for r once Seq is set.
func storedAudit(r *http.Request, status int) *tenant.AuditRecord {
	ae := auditOf(r)
	if ae == nil {
		return nil
	}
	ae.stored = auditRecord(r, ae.pattern, ae, status, "")
	return ae.stored
}

var wildcardRE = regexp.MustCompile(`\{([A-Za-z_]+)\}`)

// auditTarget is the id a request created (from the Location of a 201 that
// names /v1/<collection>/<id>), else the most specific id in its path.
func auditTarget(r *http.Request, pattern string, sw *statusWriter) string {
	if sw.status == http.StatusCreated {
		if u, err := url.Parse(sw.Header().Get("Location")); err == nil {
			if parts := strings.Split(strings.Trim(u.Path, "/"), "/"); len(parts) == 3 || (len(parts) == 5 && parts[3] == "keys") {
				return parts[len(parts)-1]
			}
		}
	}
	names := wildcardRE.FindAllStringSubmatch(pattern, -1)
	if len(names) == 0 {
		return ""
	}
	return r.PathValue(names[len(names)-1][1])
}

func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	serveGet(s, http.StatusOK, func(r *http.Request) (api.AuditPage, error) {
		f, err := apiwire.AuditFilter(r.URL.Query())
		if err != nil {
			return api.AuditPage{}, err
		}
		limit := f.Limit
		f.Limit++ // one more tells whether another page follows
		list, err := s.tenancy.ListAudit(r.Context(), principalOf(r), f)
		return apiwire.AuditPage(list, limit, max(f.AfterSeq, f.BeforeSeq)), err
	})(w, r)
}
