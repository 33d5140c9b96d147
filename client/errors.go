package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"genesis.dev/sandbox/api"
)

// APIError is a non-2xx answer of the service. Problem holds the decoded
// application/problem+json body; for answers that are not problem+json (a
// proxy's error page, say) it is filled from the status and the body text.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Problem is the error body; Problem.Code is the stable error code.
	Problem Problem
	// RequestID is the X-Request-ID of the answer, or the problem's
	// request_id when the header is missing.
	RequestID string
}

// Error returns "<status> <code>: <detail>", for example
// "409 runtime_unavailable: runtime runsc is not installed".
func (e *APIError) Error() string {
	code := e.Problem.Code
	if code == "" {
		code = strings.ToLower(strings.ReplaceAll(statusText(e.Status), " ", "_"))
	}
	return fmt.Sprintf("%d %s: %s", e.Status, code, e.Message())
}

// Message is the human part of the error: the problem's detail, else its
// title, else the HTTP status text.
func (e *APIError) Message() string {
	switch {
	case e.Problem.Detail != "":
		return e.Problem.Detail
	case e.Problem.Title != "":
		return e.Problem.Title
	default:
		return statusText(e.Status)
	}
}

// statusText is http.StatusText that also names StatusClientClosed.
func statusText(status int) string {
	if status == StatusClientClosed {
		return "Client Closed Request"
	}
	return http.StatusText(status)
}

// newAPIError builds the error for a non-2xx answer with the given body.
func newAPIError(status int, h http.Header, body []byte) *APIError {
	e := &APIError{Status: status, RequestID: h.Get(api.HeaderRequestID)}
	var p Problem
	if len(body) > 0 && json.Unmarshal(body, &p) == nil && (p.Code != "" || p.Title != "" || p.Detail != "") {
		e.Problem = p
		if e.Problem.Status == 0 {
			e.Problem.Status = status
		}
	} else {
		e.Problem = Problem{Title: statusText(status), Status: status, Detail: bodySnippet(body)}
	}
	if e.RequestID == "" {
		e.RequestID = e.Problem.RequestID
	}
	return e
}

// bodySnippet returns the start of a non-problem error body as one line of
// valid UTF-8 text.
func bodySnippet(body []byte) string {
	const max = 200
	s := strings.ToValidUTF8(string(body), "\uFFFD")
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// IsNotFound reports whether err is an *APIError of status 404.
func IsNotFound(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == http.StatusNotFound
}

// ErrorCode returns the problem code of an *APIError in err's chain (for
// example "runtime_unavailable"), or "" when there is none.
func ErrorCode(err error) string {
	var e *APIError
	if errors.As(err, &e) {
		return e.Problem.Code
	}
	return ""
}

// IsPreconditionFailed reports whether err is an *APIError of status 412:
// the If-Match given no longer names the resource's current version (or
// never could), so re-read the resource and decide again.
func IsPreconditionFailed(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == http.StatusPreconditionFailed
}
