package httpapi

import (
	"net/http"
	"net/url"
	"strconv"

	"genesis.dev/sandbox/client"
	"genesis.dev/sandbox/internal/control"
	"genesis.dev/sandbox/internal/tenant"
)

// tenantRoutes serves the admin API: tenants and their API keys. Callers
// without an admin key get 403 with code "admin_required".
func (s *Server) tenantRoutes() {
	s.handle("POST", "/v1/tenants", true, s.adminOnly(s.createTenant))
	s.handle("GET", "/v1/tenants", true, s.adminOnly(s.listTenants))
	s.handle("GET", "/v1/tenants/{name}", true, s.adminOnly(s.getTenant))
	s.handle("PATCH", "/v1/tenants/{name}", true, s.adminOnly(s.patchTenant))
	s.handle("DELETE", "/v1/tenants/{name}", true, s.adminOnly(s.deleteTenant))
	s.handle("POST", "/v1/tenants/{name}/keys", true, s.adminOnly(s.createKey))
	s.handle("GET", "/v1/tenants/{name}/keys", true, s.adminOnly(s.listKeys))
	s.handle("DELETE", "/v1/tenants/{name}/keys/{key_id}", true, s.adminOnly(s.revokeKey))
}

func tenantWire(t *tenant.Tenant) client.Tenant {
	q := t.Quotas
	return client.Tenant{
		Name: t.Name, Weight: max(t.Weight, 1), MinRiskLevel: string(t.MinRiskLevel), MaxToolRiskLevel: string(t.MaxToolRiskLevel), Admin: t.Admin,
		Quotas: client.Quotas{MaxSandboxes: q.MaxSandboxes, MaxCPU: q.MaxCPU, MaxMemoryMB: q.MaxMemoryMB, MaxLeases: q.MaxLeases},
		Source: string(t.Source), ResourceVersion: strconv.FormatInt(t.ResourceVersion, 10),
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
	}
}

func usageWire(u tenant.Usage) *client.Usage {
	return &client.Usage{Sandboxes: u.Sandboxes, CPU: u.CPU, MemoryMB: u.MemoryMB, Leases: u.Leases}
}

func keyWire(k *tenant.Key) client.APIKey {
	return client.APIKey{ID: k.ID, Tenant: k.Tenant, Prefix: k.Prefix, Description: k.Description, Scopes: k.Scopes, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
}

func tenantETag(t *tenant.Tenant) string { return `"` + strconv.FormatInt(t.ResourceVersion, 10) + `"` }

func (s *Server) createTenant(w http.ResponseWriter, r *http.Request) {
	var req client.CreateTenantRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	in := control.TenantInput{Name: req.Name, Weight: req.Weight, MinRiskLevel: req.MinRiskLevel, MaxToolRiskLevel: req.MaxToolRiskLevel, Admin: req.Admin}
	if q := req.Quotas; q != nil {
		in.Quotas = tenant.Quotas{MaxSandboxes: q.MaxSandboxes, MaxCPU: q.MaxCPU, MaxMemoryMB: q.MaxMemoryMB, MaxLeases: q.MaxLeases}
	}
	t, err := s.ctl.CreateTenant(r.Context(), in)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("ETag", tenantETag(t))
	w.Header().Set("Location", "/v1/tenants/"+url.PathEscape(t.Name))
	writeJSON(w, http.StatusCreated, tenantWire(t))
}

func (s *Server) listTenants(w http.ResponseWriter, r *http.Request) {
	list, err := s.ctl.ListTenants(r.Context())
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := client.TenantList{Items: make([]client.Tenant, len(list))}
	for i, v := range list {
		out.Items[i] = tenantWire(v.Tenant)
		out.Items[i].Usage = usageWire(v.Usage)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getTenant(w http.ResponseWriter, r *http.Request) {
	v, err := s.ctl.GetTenant(r.Context(), r.PathValue("name"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := tenantWire(v.Tenant)
	out.Usage = usageWire(v.Usage)
	w.Header().Set("ETag", tenantETag(v.Tenant))
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) patchTenant(w http.ResponseWriter, r *http.Request) {
	ifv, err := parseIfMatch(r.Header.Get("If-Match"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	var req client.UpdateTenantRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	p := control.TenantPatch{Weight: req.Weight, MinRiskLevel: req.MinRiskLevel, MaxToolRiskLevel: req.MaxToolRiskLevel, Admin: req.Admin}
	if q := req.Quotas; q != nil {
		p.Quotas = control.QuotasPatch{MaxSandboxes: q.MaxSandboxes, MaxCPU: q.MaxCPU, MaxMemoryMB: q.MaxMemoryMB, MaxLeases: q.MaxLeases}
	}
	t, err := s.ctl.UpdateTenant(r.Context(), r.PathValue("name"), ifv, p)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("ETag", tenantETag(t))
	writeJSON(w, http.StatusOK, tenantWire(t))
}

func (s *Server) deleteTenant(w http.ResponseWriter, r *http.Request) {
	ifv, err := parseIfMatch(r.Header.Get("If-Match"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if err := s.ctl.DeleteTenant(r.Context(), r.PathValue("name"), ifv); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) {
	var req client.CreateAPIKeyRequest
	if r.ContentLength != 0 {
		if err := s.decode(w, r, &req); err != nil {
			s.writeProblem(w, r, err)
			return
		}
	}
	name := r.PathValue("name")
	k, secret, err := s.ctl.CreateKey(r.Context(), name, req.Description, req.Scopes)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := keyWire(k)
	out.Key = secret
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", "/v1/tenants/"+url.PathEscape(name)+"/keys/"+k.ID)
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) {
	list, err := s.ctl.ListKeys(r.Context(), r.PathValue("name"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := client.APIKeyList{Items: make([]client.APIKey, len(list))}
	for i, k := range list {
		out.Items[i] = keyWire(k)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) {
	if _, err := s.ctl.RevokeKey(r.Context(), r.PathValue("name"), r.PathValue("key_id")); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
