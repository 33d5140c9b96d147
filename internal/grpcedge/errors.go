package grpcedge

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/durationpb"

	"genesis.dev/sandbox/internal/errdefs"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of the service's errors.
const ErrorDomain = "sandbox.genesis.dev"

// Metadata keys of the ErrorInfo detail.
const (
	// MetaRequestID is the request id, as the HTTP API's problem's
	// request_id and X-Request-Id.
	MetaRequestID = "request_id"
)

// toConnect translates err once, from errdefs' one class table: its gRPC
// code, its message, and an ErrorInfo detail whose reason is the stable
// code (HTTP: the problem's code) and whose metadata holds the request
// id; a Retry-After becomes a RetryInfo detail. An error that already is
// a *connect.Error (from connect-go itself) passes unchanged.
func (e *Edge) toConnect(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	code := connect.Code(errdefs.GRPCCode(err))
	msg := errdefs.Detail(err)
	switch code {
	case connect.CodeCanceled:
		e.log.Debug("client canceled call", "request_id", requestIDOf(ctx), "err", err)
	case connect.CodeInternal:
		// As the HTTP API's 500: the cause is logged, not answered.
		e.log.Error("internal error", "request_id", requestIDOf(ctx), "err", err)
		msg = "internal error; see the service log for request " + requestIDOf(ctx)
	}
	out := connect.NewError(code, errors.New(msg))
	info := &errdetails.ErrorInfo{Reason: errdefs.Code(err), Domain: ErrorDomain, Metadata: map[string]string{}}
	if rid := requestIDOf(ctx); rid != "" {
		info.Metadata[MetaRequestID] = rid
	}
	if d, err := connect.NewErrorDetail(info); err == nil {
		out.AddDetail(d)
	}
	if after, ok := retryAfter(err); ok {
		if d, err := connect.NewErrorDetail(&errdetails.RetryInfo{RetryDelay: durationpb.New(after)}); err == nil {
			out.AddDetail(d)
		}
	}
	return out
}

// retryAfter is when to retry err: its own Retry-After, else the HTTP
// API's defaults for its class (resource exhausted 5 s, unavailable 2 s).
func retryAfter(err error) (time.Duration, bool) {
	if after, ok := errdefs.RetryAfter(err); ok {
		return after, true
	}
	switch {
	case errors.Is(err, errdefs.ErrResourceExhausted):
		return 5 * time.Second, true
	case errors.Is(err, errdefs.ErrUnavailable):
		return 2 * time.Second, true
	}
	return 0, false
}
