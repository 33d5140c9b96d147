package errdefs

import (
	"context"
	"errors"
	"fmt"
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
	grpc     GRPCStatus
}

// GRPCStatus is a canonical gRPC status code (google.rpc.Code): the same
// numbers in grpc-go's codes and connect-go's Code, so the edges convert
// it without a table of their own.
type GRPCStatus uint32

// The gRPC codes the class table uses (google.rpc.Code's numbers).
const (
	GRPCCanceled           GRPCStatus = 1
	GRPCInvalidArgument    GRPCStatus = 3
	GRPCDeadlineExceeded   GRPCStatus = 4
	GRPCNotFound           GRPCStatus = 5
	GRPCAlreadyExists      GRPCStatus = 6
	GRPCPermissionDenied   GRPCStatus = 7
	GRPCResourceExhausted  GRPCStatus = 8
	GRPCFailedPrecondition GRPCStatus = 9
	GRPCAborted            GRPCStatus = 10
	GRPCUnimplemented      GRPCStatus = 12
	GRPCInternal           GRPCStatus = 13
	GRPCUnavailable        GRPCStatus = 14
	GRPCUnauthenticated    GRPCStatus = 16
)

// GRPCCode returns the gRPC status code for err from the one class table
// (Google's API design guide's mapping of the HTTP status, with a stale
// resource_version, HTTP's 412, as FAILED_PRECONDITION).
func GRPCCode(err error) GRPCStatus { return classOf(err).grpc }

// table is the one place where error classes map to HTTP statuses and
// gRPC codes.
var table = []class{
	{ErrInvalidArgument, http.StatusBadRequest, "invalid_argument", GRPCInvalidArgument},
	{ErrUnauthenticated, http.StatusUnauthorized, "unauthenticated", GRPCUnauthenticated},
	{ErrPermissionDenied, http.StatusForbidden, "permission_denied", GRPCPermissionDenied},
	{ErrNotFound, http.StatusNotFound, "not_found", GRPCNotFound},
	{ErrMethodNotAllowed, http.StatusMethodNotAllowed, "method_not_allowed", GRPCUnimplemented},
	{ErrAlreadyExists, http.StatusConflict, "already_exists", GRPCAlreadyExists},
	{ErrConflict, http.StatusConflict, "conflict", GRPCAborted},
	{ErrFailedPrecondition, http.StatusConflict, "failed_precondition", GRPCFailedPrecondition},
	{ErrPreconditionFailed, http.StatusPreconditionFailed, "precondition_failed", GRPCFailedPrecondition},
	{ErrTooLarge, http.StatusRequestEntityTooLarge, "too_large", GRPCResourceExhausted},
	{ErrResourceExhausted, http.StatusTooManyRequests, "resource_exhausted", GRPCResourceExhausted},
	{ErrNotImplemented, http.StatusNotImplemented, "not_implemented", GRPCUnimplemented},
	{ErrUnavailable, http.StatusServiceUnavailable, "unavailable", GRPCUnavailable},
	{ErrBadGateway, http.StatusBadGateway, "bad_gateway", GRPCUnavailable},
	{ErrDeadlineExceeded, http.StatusGatewayTimeout, "deadline_exceeded", GRPCDeadlineExceeded},
	// Context errors that reach the edge unclassified: the caller went away,
	// or a deadline ran out on the way. Neither is an internal error.
	{context.Canceled, StatusClientClosed, "client_closed", GRPCCanceled},
	{context.DeadlineExceeded, http.StatusGatewayTimeout, "deadline_exceeded", GRPCDeadlineExceeded},
}

var internalClass = class{ErrInternal, http.StatusInternalServerError, "internal", GRPCInternal}

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

// Invalid is an invalid argument whose message, a sentence that says what
// is wrong ("timeout_ms must be between 1 and 3600000, got -1"), is the
// whole text: the class's text is not appended (Mark).
func Invalid(format string, args ...any) error {
	return Mark(fmt.Errorf(format, args...), ErrInvalidArgument)
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
