package main

import "testing"

// TestLeaseAcquireNetwork: the network flags of lease acquire go out as the
// request's network policy.
func TestLeaseAcquireNetwork(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, reply(201, `{"lease_id":"lse-1","sandbox_id":"sb-1","state":"active"}`))
	r := cli(t, api.URL, "", nil,
		"lease", "acquire", "--profile", "tool-basic", "--allow", "api.example.com:443")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	jsonEqual(t, api.only(t).Body, `{"profile":"tool-basic","network":{"mode":"allowlist","allow":[{"host":"api.example.com","ports":[443]}]}}`)
}
