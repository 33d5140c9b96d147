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
	s.handle("POST", "/v1/tenants", true, s.adminOnly(serveBodyHeaded(s, http.StatusCreated, func(h http.Header, r *http.Request, req *api.CreateTenantRequest) (api.Tenant, error) {
		t, err := s.tenancy.CreateTenant(r.Context(), apiwire.TenantInput(*req))
		if err != nil {
			return api.Tenant{}, err
		}
		h.Set("ETag", tenantETag(t))
		h.Set("Location", "/v1/tenants/"+url.PathEscape(t.Name))
		return apiwire.Tenant(t), nil
	})))
	s.handle("GET", "/v1/tenants", true, s.adminOnly(serveGet(s, http.StatusOK, func(r *http.Request) (api.TenantList, error) {
		return wired(apiwire.TenantList)(s.tenancy.ListTenants(r.Context()))
	})))
	s.handle("GET", "/v1/tenants/{name}", true, s.adminOnly(serveHeaded(s, http.StatusOK, func(h http.Header, r *http.Request) (api.Tenant, error) {
		v, err := s.tenancy.GetTenant(r.Context(), r.PathValue("name"))
		if err != nil {
			return api.Tenant{}, err
		}
		h.Set("ETag", tenantETag(v.Tenant))
		return apiwire.TenantView(v), nil
	})))
	s.handle("PATCH", "/v1/tenants/{name}", true, s.adminOnly(s.patchTenant))
	s.handle("DELETE", "/v1/tenants/{name}", true, s.adminOnly(serveNoContent(s, func(r *http.Request) error {
		ifv, err := apiwire.ParseIfMatch(r.Header.Get("If-Match"))
		if err != nil {
			return err
		}
		return s.tenancy.DeleteTenant(r.Context(), r.PathValue("name"), ifv)
	})))
	s.handle("POST", "/v1/tenants/{name}/keys", true, s.adminOnly(s.createKey))
	s.handle("GET", "/v1/tenants/{name}/keys", true, s.adminOnly(serveGet(s, http.StatusOK, func(r *http.Request) (api.APIKeyList, error) {
		return wired(apiwire.Keys)(s.tenancy.ListKeys(r.Context(), r.PathValue("name")))
	})))
	s.handle("DELETE", "/v1/tenants/{name}/keys/{key_id}", true, s.adminOnly(serveNoContent(s, func(r *http.Request) error {
		_, err := s.tenancy.RevokeKey(r.Context(), r.PathValue("name"), r.PathValue("key_id"))
		return err
	})))
}

func tenantETag(t *tenant.Tenant) string { return `"` + strconv.FormatInt(t.ResourceVersion, 10) + `"` }

func (s *Server) patchTenant(w http.ResponseWriter, r *http.Request) {
	ifv, err := apiwire.ParseIfMatch(r.Header.Get("If-Match"))
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	serveBodyHeaded(s, http.StatusOK, func(h http.Header, r *http.Request, req *api.UpdateTenantRequest) (api.Tenant, error) {
		t, err := s.tenancy.UpdateTenant(r.Context(), r.PathValue("name"), ifv, apiwire.TenantPatch(*req))
		if err != nil {
			return api.Tenant{}, err
		}
		h.Set("ETag", tenantETag(t))
		return apiwire.Tenant(t), nil
	})(w, r)
}

// createKey serves POST /v1/tenants/{name}/keys: the answer holds the
// key's secret, the one time it is shown (never cached).
func (s *Server) createKey(w http.ResponseWriter, r *http.Request) {
	serveOptionalBody(s, http.StatusCreated, func(r *http.Request, req *api.CreateAPIKeyRequest) (api.APIKey, error) {
		name := r.PathValue("name")
		k, secret, err := s.tenancy.CreateKey(r.Context(), name, req.Description, req.Scopes)
		if err != nil {
			return api.APIKey{}, err
		}
		out := apiwire.Key(k)
		out.Key = secret
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Location", "/v1/tenants/"+url.PathEscape(name)+"/keys/"+k.ID)
		return out, nil
	})(w, r)
}
