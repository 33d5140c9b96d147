package apiwire

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/tenancy"
)

// Paging bounds of GET /v1/audit.
const (
	auditDefaultLimit = 100
	auditMaxLimit     = 1000
)

var problemCodeRE = regexp.MustCompile(`^[a-z][a-z_]{0,63}$`)

// AuditFilter reads the query of GET /v1/audit (tenant, action, target,
// since, until, limit, order, cursor, result); which tenants' records the
// caller may read is tenancy.Service.ListAudit's to say.
func AuditFilter(q url.Values) (tenancy.AuditFilter, error) {
	f := tenancy.AuditFilter{Tenant: q.Get("tenant"), Action: q.Get("action"), Target: q.Get("target"), Limit: auditDefaultLimit}
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
