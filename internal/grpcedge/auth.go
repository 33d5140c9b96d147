package grpcedge

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/errdefs"
)

// interceptor gives every call of the edge's services a request id and
// the caller's principal (or answers UNAUTHENTICATED), and translates the
// errors the handlers return (errdefs classes) to connect errors once.
type interceptor struct{ edge *Edge }

var errNoKey = errdefs.WithCode("unauthenticated", errdefs.Mark(
	errors.New("no API key: send the metadata authorization: Bearer <api key>"), errdefs.ErrUnauthenticated))

// begin resolves the call's request id and principal from its headers.
func (i *interceptor) begin(ctx context.Context, h interface{ Get(string) string }) (context.Context, error) {
	ctx = context.WithValue(ctx, requestIDKey, newRequestID(h.Get(api.HeaderRequestID)))
	key, ok := bearer(h.Get("Authorization"))
	if !ok {
		return ctx, errNoKey
	}
	p, err := i.edge.auth(ctx, key)
	if err != nil {
		return ctx, err
	}
	return context.WithValue(ctx, principalKey, p), nil
}

func (i *interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		ctx, err := i.begin(ctx, req.Header())
		rid := requestIDOf(ctx)
		var resp connect.AnyResponse
		if err == nil {
			resp, err = next(ctx, req)
		}
		if err != nil {
			err = i.edge.toConnect(ctx, err)
			var ce *connect.Error
			if errors.As(err, &ce) {
				ce.Meta().Set(api.HeaderRequestID, rid)
			}
			return nil, err
		}
		resp.Header().Set(api.HeaderRequestID, rid)
		return resp, nil
	}
}

func (i *interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		ctx, err := i.begin(ctx, conn.RequestHeader())
		conn.ResponseHeader().Set(api.HeaderRequestID, requestIDOf(ctx))
		if err == nil {
			err = next(ctx, conn)
		}
		if err != nil {
			return i.edge.toConnect(ctx, err)
		}
		return nil
	}
}
