package api

// OpenSandboxSandbox is a sandbox as the OpenSandbox SDKs see it
// (GET /opensandbox/v1/sandboxes).
type OpenSandboxSandbox struct {
	ID     string `json:"id"`
	Status struct {
		State   string `json:"state"`
		Message string `json:"message,omitempty"`
	} `json:"status"`
	Image *struct {
		URI string `json:"uri"`
	} `json:"image,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	ExpiresAt string            `json:"expiresAt,omitempty"`
	CreatedAt string            `json:"createdAt"`
}

// OpenSandboxSandboxList is a page of GET /opensandbox/v1/sandboxes.
type OpenSandboxSandboxList struct {
	Items []OpenSandboxSandbox `json:"items"`
}
