package api

// StatusClientClosed is the status the service gives a request whose
// caller went away before the answer (problem code "client_closed").
const StatusClientClosed = 499

// ProblemMediaType is the media type of every error answer (Problem).
const ProblemMediaType = "application/problem+json"

// Headers of the API beyond HTTP's own.
const (
	// HeaderRequestID is the id of a request: the service keeps a
	// well-formed one the caller sends, makes one otherwise, and answers
	// with it (Problem.RequestID repeats it).
	HeaderRequestID = "X-Request-ID"
	// HeaderActAs names the tenant an admin key acts for: the service
	// answers as to that tenant's own key.
	HeaderActAs = "X-Genesis-Tenant"
	// HeaderIdempotencyKey makes POST /v1/sandboxes repeatable: the same
	// key returns the same sandbox.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderJobID names the job of a streamed exec (its answer's header).
	HeaderJobID = "X-Genesis-Job-ID"
	// HeaderPreviewToken carries a preview link's token to a preview host.
	HeaderPreviewToken = "X-Genesis-Preview-Token"
)
