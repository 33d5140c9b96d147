package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"genesis.dev/sandbox/client"
)

// TestTerminalTickets opens the terminal WebSocket with a ticket instead of
// a header: once, for its own sandbox only, and never for another tenant.
func TestTerminalTickets(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	sb, _ := a.createHTTP(keyA, client.CreateSandboxRequest{})
	other, _ := a.createHTTP(keyA, client.CreateSandboxRequest{})
	ticket := func(key, sandbox string) string {
		t.Helper()
		resp, body := a.do(req{method: "POST", path: "/v1/sandboxes/" + sandbox + "/terminal/tickets", key: key, body: "{}"})
		if resp.StatusCode != http.StatusCreated || resp.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("ticket: %d %s", resp.StatusCode, body)
		}
		var tk client.TerminalTicket
		if err := json.Unmarshal(body, &tk); err != nil || !strings.HasPrefix(tk.Ticket, "tkt_") || tk.ExpiresAt.IsZero() {
			t.Fatalf("ticket %s: %v", body, err)
		}
		return tk.Ticket
	}

	tk := ticket(keyA, sb.ID)
	c, _, err := a.dialTerminal(sb.ID, "ticket="+url.QueryEscape(tk), "")
	if err != nil {
		t.Fatalf("terminal with a ticket: %v", err)
	}
	c.hello(true)
	c.send("echo ticket-$((20+22))\n")
	c.waitOutput("ticket-42")

	refused := func(name, sandbox, query string) {
		t.Helper()
		_, resp, err := a.dialTerminal(sandbox, query, "")
		if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %v %+v, want 401", name, err, resp)
			return
		}
		var p client.Problem
		if json.NewDecoder(resp.Body).Decode(&p); p.Code != "invalid_ticket" {
			t.Errorf("%s: code %q, want invalid_ticket", name, p.Code)
		}
	}
	refused("a used ticket", sb.ID, "ticket="+url.QueryEscape(tk))
	refused("an unknown ticket", sb.ID, "ticket=tkt_nothing")
	tk2 := ticket(keyA, sb.ID)
	refused("a ticket for another sandbox", other.ID, "ticket="+url.QueryEscape(tk2))
	refused("that ticket after the wrong use", sb.ID, "ticket="+url.QueryEscape(tk2))

	// Another tenant cannot get a ticket for the sandbox: the same 404 as
	// an id that does not exist.
	for _, id := range []string{sb.ID, "sbx_0000000000000000"} {
		resp, body := a.do(req{method: "POST", path: "/v1/sandboxes/" + id + "/terminal/tickets", key: keyB, body: "{}"})
		checkProblem(t, resp, body, http.StatusNotFound, "not_found")
	}
	resp, body := a.do(req{method: "POST", path: "/v1/sandboxes/" + sb.ID + "/terminal/tickets", body: "{}"})
	checkProblem(t, resp, body, http.StatusUnauthorized, "unauthenticated")
}

// TestTerminalTicketsPerTenantCap: one tenant cannot take every terminal
// ticket: past its share it gets 429 too_many_tickets with Retry-After,
// and another tenant still gets tickets and opens its terminal.
func TestTerminalTicketsPerTenantCap(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	sa, _ := a.createHTTP(keyA, client.CreateSandboxRequest{})
	sb, _ := a.createHTTP(keyB, client.CreateSandboxRequest{})
	path := func(id string) string { return "/v1/sandboxes/" + id + "/terminal/tickets" }
	var resp *http.Response
	var body []byte
	for i := 0; i < 1000; i++ {
		if resp, body = a.do(req{method: "POST", path: path(sa.ID), key: keyA, body: "{}"}); resp.StatusCode != http.StatusCreated {
			break
		}
	}
	checkProblem(t, resp, body, http.StatusTooManyRequests, "too_many_tickets")
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 30 {
		t.Errorf("Retry-After %q, want 1..30 seconds", resp.Header.Get("Retry-After"))
	}
	resp, body = a.do(req{method: "POST", path: path(sb.ID), key: keyB, body: "{}"})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("tenant b beside a tenant at its cap: %d %s", resp.StatusCode, body)
	}
	tk := decodeJSON[client.TerminalTicket](t, body)
	c, _, err := a.dialTerminal(sb.ID, "ticket="+url.QueryEscape(tk.Ticket), "")
	if err != nil {
		t.Fatalf("b's terminal with its ticket: %v", err)
	}
	c.hello(true)
}

// TestTerminalTicketActingAdmin: an admin acting for a tenant
// (X-Genesis-Tenant) gets a ticket that opens that tenant's terminal; the
// ticket is checked again when it is used: a key revoked or no longer an
// admin's meanwhile opens nothing, nor does a sandbox that is gone.
func TestTerminalTicketActingAdmin(t *testing.T) {
	t.Parallel()
	a := newAPI(t, nil)
	sb, _ := a.createHTTP(keyA, client.CreateSandboxRequest{})
	as := map[string]string{"X-Genesis-Tenant": "a"}
	ticket := func(key, sandbox string) string {
		t.Helper()
		resp, body := a.do(req{method: "POST", path: "/v1/sandboxes/" + sandbox + "/terminal/tickets", key: key, body: "{}", header: as})
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("ticket acting for a: %d %s", resp.StatusCode, body)
		}
		return decodeJSON[client.TerminalTicket](t, body).Ticket
	}
	c, resp, err := a.dialTerminal(sb.ID, "ticket="+url.QueryEscape(ticket(keyAdmin, sb.ID)), "")
	if err != nil {
		t.Fatalf("the acting admin's ticket: %v (%+v)", err, resp)
	}
	c.hello(true)
	c.send("echo acting-$((40+2))\n")
	c.waitOutput("acting-42")

	// An admin key made through the API, so that it can be revoked and its
	// tenant demoted.
	admin := func(method, path, body string) (*http.Response, []byte) {
		return a.do(req{method: method, path: path, key: keyAdmin, body: body})
	}
	if resp, body := admin("POST", "/v1/tenants", `{"name":"ops","admin":true}`); resp.StatusCode != http.StatusCreated {
		t.Fatalf("tenant ops: %d %s", resp.StatusCode, body)
	}
	resp, body := admin("POST", "/v1/tenants/ops/keys", `{"description":"on call"}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("key of ops: %d %s", resp.StatusCode, body)
	}
	key := decodeJSON[client.APIKey](t, body)
	refused := func(name, ticket string, status int, code string) {
		t.Helper()
		_, resp, err := a.dialTerminal(sb.ID, "ticket="+url.QueryEscape(ticket), "")
		if err == nil || resp == nil || resp.StatusCode != status {
			t.Errorf("%s: %v %+v, want %d", name, err, resp, status)
			return
		}
		var p client.Problem
		if json.NewDecoder(resp.Body).Decode(&p); p.Code != code {
			t.Errorf("%s: code %q, want %s", name, p.Code, code)
		}
	}
	demoted := ticket(key.Key, sb.ID)
	revoked := ticket(key.Key, sb.ID)
	if resp, body := admin("PATCH", "/v1/tenants/ops", `{"admin":false}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("demote ops: %d %s", resp.StatusCode, body)
	}
	refused("a ticket of a key no longer an admin's", demoted, http.StatusForbidden, "admin_required")
	if resp, body := admin("DELETE", "/v1/tenants/ops/keys/"+key.ID, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", resp.StatusCode, body)
	}
	refused("a ticket of a revoked key", revoked, http.StatusUnauthorized, "unauthenticated")
	gone := ticket(keyAdmin, sb.ID)
	if resp, body := a.do(req{method: "DELETE", path: "/v1/sandboxes/" + sb.ID, key: keyA}); resp.StatusCode/100 != 2 {
		t.Fatalf("delete: %d %s", resp.StatusCode, body)
	}
	refused("a ticket for a sandbox deleted since", gone, http.StatusConflict, "sandbox_not_running")
}
