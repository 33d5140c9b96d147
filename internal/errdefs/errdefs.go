package errdefs

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
)

// Class sentinels. Wrap them; never compare error strings.
var (
	ErrInvalidArgument    = errors.New("invalid argument")
	ErrNotFound           = errors.New("not found")
	ErrMethodNotAllowed   = errors.New("method not allowed") // the path exists, with other methods
	ErrAlreadyExists      = errors.New("already exists")
	ErrConflict           = errors.New("conflict")
	ErrFailedPrecondition = errors.New("failed precondition")
	ErrPreconditionFailed = errors.New("precondition failed") // If-Match mismatch
	ErrUnauthenticated    = errors.New("unauthenticated")
	ErrPermissionDenied   = errors.New("permission denied")
	ErrTooLarge           = errors.New("too large")
	ErrResourceExhausted  = errors.New("resource exhausted")
	ErrNotImplemented     = errors.New("not implemented")
	ErrUnavailable        = errors.New("unavailable")
	ErrDeadlineExceeded   = errors.New("deadline exceeded")
	ErrBadGateway         = errors.New("bad gateway") // a service inside a sandbox did not answer
	ErrInternal           = errors.New("internal error")
)

// Coded is implemented by errors that carry a stable, machine-readable problem
// code (for example "runtime_unavailable" or "image_not_built").
type Coded interface {
	error
	Code() string
}

type codedError struct {
	code string
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }
func (e *codedError) Code() string  { return e.code }

// WithCode attaches a stable problem code to err. The class of err is kept.
func WithCode(code string, err error) error {
	if err == nil {
		return nil
	}
	return &codedError{code: code, err: err}
}

// Code returns the most specific problem code of err: an explicit code set
// with WithCode, otherwise the default code of its class.
func Code(err error) string {
	var c Coded
	if errors.As(err, &c) {
		return c.Code()
	}
	return classOf(err).code
}

// HTTPStatus returns the HTTP status for err from the one class table.
func HTTPStatus(err error) int { return classOf(err).status }

// StatusClientClosed is the non-standard status of a request the client gave
// up on before the answer (context.Canceled), as nginx logs it. Nobody reads
// the answer; the status keeps such requests apart from server faults in
// logs and metrics.
const StatusClientClosed = 499

// StatusText is http.StatusText that also names StatusClientClosed.
func StatusText(status int) string {
	if status == StatusClientClosed {
		return "Client Closed Request"
	}
	return http.StatusText(status)
}

type class struct {
	sentinel error
	status   int
	code     string
}

// table is the one place where error classes map to HTTP statuses.
var table = []class{
	{ErrInvalidArgument, http.StatusBadRequest, "invalid_argument"},
	{ErrUnauthenticated, http.StatusUnauthorized, "unauthenticated"},
	{ErrPermissionDenied, http.StatusForbidden, "permission_denied"},
	{ErrNotFound, http.StatusNotFound, "not_found"},
	{ErrMethodNotAllowed, http.StatusMethodNotAllowed, "method_not_allowed"},
	{ErrAlreadyExists, http.StatusConflict, "already_exists"},
	{ErrConflict, http.StatusConflict, "conflict"},
	{ErrFailedPrecondition, http.StatusConflict, "failed_precondition"},
	{ErrPreconditionFailed, http.StatusPreconditionFailed, "precondition_failed"},
	{ErrTooLarge, http.StatusRequestEntityTooLarge, "too_large"},
	{ErrResourceExhausted, http.StatusTooManyRequests, "resource_exhausted"},
	{ErrNotImplemented, http.StatusNotImplemented, "not_implemented"},
	{ErrUnavailable, http.StatusServiceUnavailable, "unavailable"},
	{ErrBadGateway, http.StatusBadGateway, "bad_gateway"},
	{ErrDeadlineExceeded, http.StatusGatewayTimeout, "deadline_exceeded"},
	// Context errors that reach the edge unclassified: the caller went away,
	// or a deadline ran out on the way. Neither is an internal error.
	{context.Canceled, StatusClientClosed, "client_closed"},
	{context.DeadlineExceeded, http.StatusGatewayTimeout, "deadline_exceeded"},
}

var internalClass = class{ErrInternal, http.StatusInternalServerError, "internal"}

func classOf(err error) class {
	for _, c := range table {
		if errors.Is(err, c.sentinel) {
			return c
		}
	}
	return internalClass
}

// Is reports whether err belongs to class; a shorthand for errors.Is.
func Is(err, class error) bool { return errors.Is(err, class) }

type retryAfterError struct {
	after time.Duration
	err   error
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// WithRetryAfter attaches a hint of when the caller may retry (sent as the
// Retry-After header). The class and code of err are kept.
func WithRetryAfter(after time.Duration, err error) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{after: after, err: err}
}

// RetryAfter returns the retry hint attached with WithRetryAfter, if any.
func RetryAfter(err error) (time.Duration, bool) {
	var r *retryAfterError
	if errors.As(err, &r) {
		return r.after, true
	}
	return 0, false
}

type markedError struct {
	err   error
	class error
}

func (e *markedError) Error() string   { return e.err.Error() }
func (e *markedError) Unwrap() []error { return []error{e.err, e.class} }

// Mark gives err the class without adding the class's text to its
// message, for a message that already says what happened ("write x: no
// space left on device" rather than "…: no space left on device: too
// large"). The code of err, if it has one, is kept.
func Mark(err, class error) error {
	if err == nil {
		return nil
	}
	return &markedError{err: err, class: class}
}

// Detail is the message of err for a person: its text with a part that a
// wrap repeated ("not found: not found", as when an error already ending
// in its class's text is wrapped with the class again) said once. Parts are
// the pieces between ": " separators.
func Detail(err error) string {
	if err == nil {
		return ""
	}
	parts := strings.Split(err.Error(), ": ")
	out := parts[:1]
	for _, p := range parts[1:] {
		if p == out[len(out)-1] {
			continue
		}
		out = append(out, p)
	}
	return strings.Join(out, ": ")
}
