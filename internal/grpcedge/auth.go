package grpcedge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/tenant"
)

// interceptor gives every call of the edge's services a request id and
// the caller's principal (or answers UNAUTHENTICATED), translates the
// errors the handlers return (errdefs classes) to connect errors once, and
// writes the audit record of every call that may change something (as the
// HTTP API audits every POST, PUT, PATCH and DELETE).
type interceptor struct{ edge *Edge }

var errNoKey = errdefs.WithCode("unauthenticated", errdefs.Mark(
	errors.New("no API key: send the metadata authorization: Bearer <api key>"), errdefs.ErrUnauthenticated))

// begin resolves the call's request id and principal from its headers.
// An admin key acts for another tenant with x-genesis-tenant, as over
// HTTP.
func (i *interceptor) begin(ctx context.Context, h http.Header) (context.Context, error) {
	ctx = context.WithValue(ctx, requestIDKey, newRequestID(h.Get(api.HeaderRequestID)))
	key, ok := bearer(h.Get("Authorization"))
	if !ok {
		return ctx, errNoKey
	}
	p, err := i.edge.auth(ctx, key)
	if err != nil {
		return ctx, err
	}
	if as := h.Get(api.HeaderActAs); as != "" && as != p.Tenant {
		if !p.Admin {
			return context.WithValue(ctx, principalKey, p), errdefs.WithCode("admin_required",
				fmt.Errorf("only an admin key may act for another tenant (%s): %w", api.HeaderActAs, errdefs.ErrPermissionDenied))
		}
		if _, err := i.edge.tenancy.GetTenant(ctx, as); err != nil {
			return context.WithValue(ctx, principalKey, p), err
		}
		p.Tenant = as
	}
	return context.WithValue(ctx, principalKey, p), nil
}

// mutating reports whether a call of spec may change something: every
// RPC not declared free of side effects.
func mutating(spec connect.Spec) bool {
	return spec.IdempotencyLevel != connect.IdempotencyNoSideEffects
}

func (i *interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		start := time.Now()
		ctx, err := i.begin(ctx, req.Header())
		rid := requestIDOf(ctx)
		var resp connect.AnyResponse
		if err == nil {
			resp, err = next(ctx, req)
		}
		i.edge.log.Debug("rpc", "request_id", rid, "procedure", req.Spec().Procedure, "protocol", req.Peer().Protocol,
			"code", codeOf(err), "duration_ms", time.Since(start).Milliseconds())
		if mutating(req.Spec()) {
			var out any
			if resp != nil {
				out = resp.Any()
			}
			i.edge.audit(ctx, req.Spec().Procedure, req.Peer().Addr, auditTarget(req.Any(), out), err)
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
		start := time.Now()
		ctx, err := i.begin(ctx, conn.RequestHeader())
		conn.ResponseHeader().Set(api.HeaderRequestID, requestIDOf(ctx))
		if err == nil {
			err = next(ctx, conn)
		}
		i.edge.log.Debug("rpc", "request_id", requestIDOf(ctx), "procedure", conn.Spec().Procedure, "protocol", conn.Peer().Protocol,
			"code", codeOf(err), "duration_ms", time.Since(start).Milliseconds())
		if mutating(conn.Spec()) {
			i.edge.audit(ctx, conn.Spec().Procedure, conn.Peer().Addr, "", err)
		}
		if err != nil {
			return i.edge.toConnect(ctx, err)
		}
		return nil
	}
}

// codeOf names the gRPC code err answers with ("ok" for none), for the
// access log.
func codeOf(err error) string {
	if err == nil {
		return "ok"
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Code().String()
	}
	return connect.Code(errdefs.GRPCCode(err)).String()
}

// audit writes the audit record of one mutating call: who (key id, or
// anonymous), tenant, action ("RPC <procedure>"), target, the result as
// the HTTP status and problem code of the same error, request id and
// remote address.
func (e *Edge) audit(ctx context.Context, procedure, remote, target string, err error) {
	p := principalOf(ctx)
	rec := &tenant.AuditRecord{
		Actor: p.KeyID, Tenant: p.Tenant, Action: "RPC " + procedure, Target: target,
		Status: http.StatusOK, RequestID: requestIDOf(ctx), Remote: remote,
	}
	if rec.Actor == "" {
		rec.Actor = tenant.ActorAnonymous
	}
	if err != nil {
		rec.Status, rec.Code = errdefs.HTTPStatus(err), errdefs.Code(err)
		var ce *connect.Error
		if errors.As(err, &ce) { // from connect-go itself: a malformed call
			rec.Status, rec.Code = http.StatusBadRequest, ce.Code().String()
		}
	}
	if err := e.tenancy.RecordAudit(ctx, rec); err != nil {
		e.log.Error("writing audit record", "request_id", rec.RequestID, "action", rec.Action, "err", err)
	}
}

// targetFields name a call's target in its request, most specific first.
var targetFields = []protoreflect.Name{"job_id", "lease_id", "sandbox_id", "id"}

// auditTarget is the id a call created (its answer's id or lease_id),
// else the most specific id its request names.
func auditTarget(in, out any) string {
	for _, m := range []any{out, in} {
		msg, ok := m.(proto.Message)
		if !ok || msg == nil {
			continue
		}
		r := msg.ProtoReflect()
		fields := r.Descriptor().Fields()
		names := targetFields
		if m == out {
			names = []protoreflect.Name{"lease_id", "id"}
		}
		for _, n := range names {
			if f := fields.ByName(n); f != nil && f.Kind() == protoreflect.StringKind {
				if v := r.Get(f).String(); v != "" {
					return v
				}
			}
		}
	}
	return ""
}
