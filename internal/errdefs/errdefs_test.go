package errdefs

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestRetryAfterKeepsClassAndCode(t *testing.T) {
	err := WithRetryAfter(3*time.Second, WithCode("quota_exceeded", fmt.Errorf("tenant a: %w", ErrResourceExhausted)))
	if d, ok := RetryAfter(err); !ok || d != 3*time.Second {
		t.Fatalf("RetryAfter = %v, %v; want 3s, true", d, ok)
	}
	if HTTPStatus(err) != 429 || Code(err) != "quota_exceeded" {
		t.Fatalf("status %d code %q; want 429 quota_exceeded", HTTPStatus(err), Code(err))
	}
	if _, ok := RetryAfter(ErrUnavailable); ok {
		t.Fatal("a plain class error carries no retry hint")
	}
}

func TestClassTable(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("bad: %w", ErrInvalidArgument), 400, "invalid_argument"},
		{fmt.Errorf("If-Match: %w", ErrPreconditionFailed), 412, "precondition_failed"},
		{fmt.Errorf("exec: %w", context.Canceled), StatusClientClosed, "client_closed"},
		{fmt.Errorf("exec: %w", context.DeadlineExceeded), 504, "deadline_exceeded"},
		{context.Canceled, StatusClientClosed, "client_closed"},
		// A classified error keeps its class even when a context error is
		// also in its chain.
		{fmt.Errorf("docker: %w: %w", ErrUnavailable, context.Canceled), 503, "unavailable"},
		{fmt.Errorf("docker: %w: %w", ErrDeadlineExceeded, context.DeadlineExceeded), 504, "deadline_exceeded"},
		{errors.New("boom"), 500, "internal"},
		{nil, 500, "internal"},
	}
	for _, c := range cases {
		if got := HTTPStatus(c.err); got != c.status {
			t.Errorf("HTTPStatus(%v) = %d; want %d", c.err, got, c.status)
		}
		if got := Code(c.err); got != c.code {
			t.Errorf("Code(%v) = %q; want %q", c.err, got, c.code)
		}
	}
	if StatusText(StatusClientClosed) != "Client Closed Request" || StatusText(404) != "Not Found" {
		t.Errorf("StatusText: %q, %q", StatusText(StatusClientClosed), StatusText(404))
	}
}

func TestMarkClassesWithoutText(t *testing.T) {
	t.Parallel()
	err := WithCode("no_space", Mark(errors.New(`write "/workspace/x": no space left on device`), ErrTooLarge))
	if err.Error() != `write "/workspace/x": no space left on device` {
		t.Errorf("Error() = %q; the class's text must not be added", err.Error())
	}
	if !errors.Is(err, ErrTooLarge) || HTTPStatus(err) != 413 || Code(err) != "no_space" {
		t.Errorf("class %d, code %q; want 413, no_space", HTTPStatus(err), Code(err))
	}
	if Mark(nil, ErrNotFound) != nil {
		t.Error("Mark(nil) is not nil")
	}
}

// TestInvalid: an invalid argument built from a sentence is that sentence,
// of the class (400, invalid_argument), and keeps an error it wraps.
func TestInvalid(t *testing.T) {
	t.Parallel()
	inner := errors.New("bad digit")
	err := Invalid("timeout_ms must be between 1 and %d, got %q: %w", 10, "x", inner)
	if err.Error() != `timeout_ms must be between 1 and 10, got "x": bad digit` {
		t.Errorf("Error() = %q; the class's text must not be added", err.Error())
	}
	if !errors.Is(err, ErrInvalidArgument) || !errors.Is(err, inner) || HTTPStatus(err) != 400 || Code(err) != "invalid_argument" {
		t.Errorf("class %d, code %q, wraps inner %v; want 400, invalid_argument, true", HTTPStatus(err), Code(err), errors.Is(err, inner))
	}
}

func TestDetailSaysARepeatedPartOnce(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ err, want string }{
		{"read x: no such file or directory: not found: not found", "read x: no such file or directory: not found"},
		{"write x: no space left on device: too large: too large", "write x: no space left on device: too large"},
		{"sandbox \"sbx_1\": not found", "sandbox \"sbx_1\": not found"},
		{"a: b: a: b", "a: b: a: b"}, // only neighbours are repeats
		{"", ""},
	} {
		if got := Detail(errors.New(c.err)); got != c.want {
			t.Errorf("Detail(%q) = %q; want %q", c.err, got, c.want)
		}
	}
	if Detail(nil) != "" {
		t.Error("Detail(nil) is not empty")
	}
}

// TestGRPCCodes: every class has a gRPC code beside its HTTP status, by
// Google's API design guide, with If-Match's 412 as FAILED_PRECONDITION.
func TestGRPCCodes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		want GRPCStatus
	}{
		{fmt.Errorf("bad: %w", ErrInvalidArgument), GRPCInvalidArgument},
		{fmt.Errorf("who: %w", ErrUnauthenticated), GRPCUnauthenticated},
		{fmt.Errorf("no: %w", ErrPermissionDenied), GRPCPermissionDenied},
		{fmt.Errorf("gone: %w", ErrNotFound), GRPCNotFound},
		{fmt.Errorf("twice: %w", ErrAlreadyExists), GRPCAlreadyExists},
		{fmt.Errorf("race: %w", ErrConflict), GRPCAborted},
		{fmt.Errorf("paused: %w", ErrFailedPrecondition), GRPCFailedPrecondition},
		{fmt.Errorf("If-Match: %w", ErrPreconditionFailed), GRPCFailedPrecondition},
		{fmt.Errorf("big: %w", ErrTooLarge), GRPCResourceExhausted},
		{fmt.Errorf("quota: %w", ErrResourceExhausted), GRPCResourceExhausted},
		{fmt.Errorf("later: %w", ErrNotImplemented), GRPCUnimplemented},
		{fmt.Errorf("GET only: %w", ErrMethodNotAllowed), GRPCUnimplemented},
		{fmt.Errorf("down: %w", ErrUnavailable), GRPCUnavailable},
		{fmt.Errorf("inside: %w", ErrBadGateway), GRPCUnavailable},
		{fmt.Errorf("slow: %w", ErrDeadlineExceeded), GRPCDeadlineExceeded},
		{context.Canceled, GRPCCanceled},
		{context.DeadlineExceeded, GRPCDeadlineExceeded},
		{errors.New("boom"), GRPCInternal},
	}
	for _, c := range cases {
		if got := GRPCCode(c.err); got != c.want {
			t.Errorf("GRPCCode(%v) = %d; want %d", c.err, got, c.want)
		}
	}
	for _, c := range table {
		if c.grpc == 0 {
			t.Errorf("class %q has no gRPC code", c.code)
		}
	}
}
