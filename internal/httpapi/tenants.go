package httpapi

import (
	"net/http"
	"net/url"
	"strconv"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/apiwire"
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

func tenantETag(t *tenant.Tenant) string { return `"` + strconv.FormatInt(t.ResourceVersion, 10) + `"` }

func (s *Server) createTenant(w http.ResponseWriter, r *http.Request) {
	var req api.CreateTenantRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	t, err := s.tenancy.CreateTenant(r.Context(), apiwire.TenantInput(req))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("ETag", tenantETag(t))
	w.Header().Set("Location", "/v1/tenants/"+url.PathEscape(t.Name))
	writeJSON(w, http.StatusCreated, apiwire.Tenant(t))
}

func (s *Server) listTenants(w http.ResponseWriter, r *http.Request) {
	list, err := s.tenancy.ListTenants(r.Context())
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := api.TenantList{Items: make([]api.Tenant, len(list))}
	for i, v := range list {
		out.Items[i] = apiwire.Tenant(v.Tenant)
		out.Items[i].Usage = apiwire.Usage(v.Usage)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getTenant(w http.ResponseWriter, r *http.Request) {
	v, err := s.tenancy.GetTenant(r.Context(), r.PathValue("name"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := apiwire.Tenant(v.Tenant)
	out.Usage = apiwire.Usage(v.Usage)
	w.Header().Set("ETag", tenantETag(v.Tenant))
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) patchTenant(w http.ResponseWriter, r *http.Request) {
	ifv, err := parseIfMatch(r.Header.Get("If-Match"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	var req api.UpdateTenantRequest
	if err := s.decode(w, r, &req); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	t, err := s.tenancy.UpdateTenant(r.Context(), r.PathValue("name"), ifv, apiwire.TenantPatch(req))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.Header().Set("ETag", tenantETag(t))
	writeJSON(w, http.StatusOK, apiwire.Tenant(t))
}

func (s *Server) deleteTenant(w http.ResponseWriter, r *http.Request) {
	ifv, err := parseIfMatch(r.Header.Get("If-Match"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if err := s.tenancy.DeleteTenant(r.Context(), r.PathValue("name"), ifv); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) {
	var req api.CreateAPIKeyRequest
	if r.ContentLength != 0 {
		if err := s.decode(w, r, &req); err != nil {
			s.writeProblem(w, r, err)
			return
		}
	}
	name := r.PathValue("name")
	k, secret, err := s.tenancy.CreateKey(r.Context(), name, req.Description, req.Scopes)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := apiwire.Key(k)
	out.Key = secret
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Location", "/v1/tenants/"+url.PathEscape(name)+"/keys/"+k.ID)
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) {
	list, err := s.tenancy.ListKeys(r.Context(), r.PathValue("name"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	out := api.APIKeyList{Items: make([]api.APIKey, len(list))}
	for i, k := range list {
		out.Items[i] = apiwire.Key(k)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) {
	if _, err := s.tenancy.RevokeKey(r.Context(), r.PathValue("name"), r.PathValue("key_id")); err != nil {
		s.writeProblem(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
