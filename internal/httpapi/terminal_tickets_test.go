package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/url"
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
