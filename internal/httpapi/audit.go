package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/tenancy"
	"genesis.dev/sandbox/internal/tenant"
)

// Paging bounds of GET /v1/audit.
const (
	auditDefaultLimit = 100
	auditMaxLimit     = 1000
)

// auditEntry collects what the audit record of one mutating request needs
// from the layers below the root handler: authenticate fills principal,
// writeProblem fills code.
type auditEntry struct {
	principal tenant.Principal
	code      string
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
	action := pattern
	if action == "" {
		action = r.Method + " (no route)"
	}
	rec := &tenant.AuditRecord{
		Actor: ae.principal.KeyID, Tenant: ae.principal.Tenant, Action: action, Target: auditTarget(r, pattern, sw),
		Status: sw.status, RequestID: requestID(r), Remote: r.RemoteAddr,
	}
	if rec.Actor == "" {
		rec.Actor = tenant.ActorAnonymous
	}
	if sw.status >= 400 {
		rec.Code = ae.code
	}
	if err := s.tenancy.RecordAudit(r.Context(), rec); err != nil {
		s.log.Error("writing audit record", "request_id", rec.RequestID, "action", action, "err", err)
	}
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

var problemCodeRE = regexp.MustCompile(`^[a-z][a-z_]{0,63}$`)

// auditFilter reads the query of GET /v1/audit. A tenant's key sees only
// its own records (asking for another tenant is 403); an admin key sees
// every tenant's, and the records of unauthenticated calls.
func auditFilter(r *http.Request) (tenancy.AuditFilter, error) {
	q := r.URL.Query()
	p := principalOf(r)
	f := tenancy.AuditFilter{Tenant: q.Get("tenant"), Action: q.Get("action"), Target: q.Get("target"), Limit: auditDefaultLimit}
	if !p.Admin {
		if f.Tenant != "" && f.Tenant != p.Tenant {
			return f, errdefs.WithCode("admin_required", fmt.Errorf("only an admin key may read another tenant's audit records: %w", errdefs.ErrPermissionDenied))
		}
		f.Tenant = p.Tenant
	}
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(t.name); v != "" {
			ts, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return f, invalidArg(t.name + " must be an RFC 3339 time, got " + strconv.Quote(v))
			}
			*t.dst = ts
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > auditMaxLimit {
			return f, invalidArg("limit must be between 1 and " + strconv.Itoa(auditMaxLimit) + ", got " + strconv.Quote(v))
		}
		f.Limit = n
	}
	switch v := q.Get("order"); v {
	case "", "oldest":
	case "newest":
		f.Newest = true
	default:
		return f, invalidArg("order must be oldest or newest, got " + strconv.Quote(v))
	}
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return f, errdefs.WithCode("invalid_cursor", invalidArg("cursor "+strconv.Quote(v)+" is not one this service returned"))
		}
		if f.Newest {
			f.BeforeSeq = n
		} else {
			f.AfterSeq = n
		}
	}
	switch v := q.Get("result"); {
	case v == "":
	case len(v) == 3 && strings.HasSuffix(v, "xx") && v[0] >= '1' && v[0] <= '5':
		f.StatusClass = int(v[0] - '0')
	case len(v) == 3:
		n, err := strconv.Atoi(v)
		if err != nil || n < 100 || n > 599 {
			return f, invalidArg("result " + strconv.Quote(v) + " is not a status, a class like 4xx, or a problem code")
		}
		f.Status = n
	case problemCodeRE.MatchString(v):
		f.Code = v
	default:
		return f, invalidArg("result " + strconv.Quote(v) + " is not a status, a class like 4xx, or a problem code")
	}
	return f, nil
}

func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	serveGet(s, http.StatusOK, func(r *http.Request) (api.AuditPage, error) {
		f, err := auditFilter(r)
		if err != nil {
			return api.AuditPage{}, err
		}
		limit := f.Limit
		f.Limit++ // one more tells whether another page follows
		list, err := s.tenancy.ListAudit(r.Context(), f)
		return apiwire.AuditPage(list, limit, max(f.AfterSeq, f.BeforeSeq)), err
	})(w, r)
}
