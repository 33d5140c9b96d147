// Package docker implements the driver contract against the Docker Engine
// API, spoken directly over the daemon's Unix socket with net/http (no Docker
// SDK).
//
// It owns: the small API client (version negotiation as the Docker CLI does
// it, from API 1.40 to 1.52 — see clientMaxAPIVersion for why it is a hand
// client and which version differences it handles — per-call deadlines,
// mapping of Docker's HTTP statuses to errdefs classes), container lifecycle
// with always-on hardening and rollback, local image import, and the
// capability probe that smoke-runs the in-sandbox agent under every runtime
// Docker offers.
//
// It imports only the driver contract, sandbox domain types and errdefs; it
// must not import store, control, pool or httpapi.
package docker
