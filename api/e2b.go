package api

import "time"

// E2BSandbox is a sandbox as the E2B adapter lists it (GET
// /e2b/v2/sandboxes; docs/compat-e2b.md).
type E2BSandbox struct {
	SandboxID  string            `json:"sandboxID"`
	TemplateID string            `json:"templateID"`
	State      string            `json:"state"`
	StartedAt  time.Time         `json:"startedAt"`
	EndAt      time.Time         `json:"endAt"`
	Metadata   map[string]string `json:"metadata"`
}
