package grpcedge

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
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
	p, err := i.edge.auth.Key(ctx, key)
	if err != nil {
		return ctx, err
	}
	ctx = context.WithValue(ctx, principalKey, p) // the actor of the audit record, whatever follows
	as, err := i.edge.auth.ActAs(ctx, p, h.Get(api.HeaderActAs))
	if err != nil {
		return ctx, err
	}
	return context.WithValue(ctx, principalKey, as), nil
}

// mutating reports whether a call of spec may change something: every
// RPC not declared free of side effects.
func mutating(spec connect.Spec) bool {
	return spec.IdempotencyLevel != connect.IdempotencyNoSideEffects
}

func (i *interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		c := call{procedure: req.Spec().Procedure, protocol: req.Peer().Protocol, remote: req.Peer().Addr, mutating: mutating(req.Spec())}
		return i.edge.unary(ctx, c, req.Header(), req.Any(), func(ctx context.Context) (connect.AnyResponse, error) {
			return next(ctx, req)
		})
	}
}

// call is what the edge's wrapping of a unary call knows of it.
type call struct {
	procedure string // "/<service>/<method>"
	protocol  string // connect's name of the protocol: grpc, grpcweb, connect
	remote    string // the client's address
	mutating  bool   // the RPC may change something (audited)
}

// unary is the edge's wrapping of every unary call, whichever transport
// it arrived on (the interceptor, or the native listener's unary path):
// the request id and the caller's principal from the request headers h
// (or UNAUTHENTICATED), the access log and metrics, the audit record of a
// mutating call, the slow request log (slow.go), the error translated once
// (toConnect) with the request id in its metadata, or the answer with the
// request id in its headers. in is the request message, next the handler.
func (e *Edge) unary(ctx context.Context, c call, h http.Header, in any, next func(context.Context) (connect.AnyResponse, error)) (connect.AnyResponse, error) {
	start := time.Now()
	q := e.slowBegin(start)
	ctx, err := (&interceptor{edge: e}).begin(ctx, h)
	rid := requestIDOf(ctx)
	var resp connect.AnyResponse
	if err == nil {
		resp, err = next(ctx)
	}
	e.observe(ctx, c.procedure, c.protocol, err, time.Since(start))
	var out any
	if resp != nil {
		out = resp.Any()
	}
	if c.mutating {
		e.audit(ctx, c.procedure, c.remote, auditTarget(in, out), err)
	}
	e.slowEnd(q, c, principalOf(ctx).Tenant, codeOf(err), rid, in, out)
	if err != nil {
		err = e.toConnect(ctx, err)
		var ce *connect.Error
		if errors.As(err, &ce) {
			ce.Meta().Set(api.HeaderRequestID, rid)
		}
		return nil, err
	}
	resp.Header().Set(api.HeaderRequestID, rid)
	return resp, nil
}

func (i *interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (i *interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		ctx, err := i.begin(ctx, conn.RequestHeader())
		conn.ResponseHeader().Set(api.HeaderRequestID, requestIDOf(ctx))
		first := &firstReceived{StreamingHandlerConn: conn}
		if err == nil {
			err = next(ctx, first)
		}
		i.edge.observe(ctx, conn.Spec().Procedure, conn.Peer().Protocol, err, time.Since(start))
		if mutating(conn.Spec()) {
			i.edge.audit(ctx, conn.Spec().Procedure, conn.Peer().Addr, first.target, err)
		}
		if err != nil {
			return i.edge.toConnect(ctx, err)
		}
		return nil
	}
}

// firstReceived keeps the target named by the first message a stream
// received (read at once: a handler may reuse the message).
type firstReceived struct {
	connect.StreamingHandlerConn
	received bool
	target   string
}

func (c *firstReceived) Receive(m any) error {
	err := c.StreamingHandlerConn.Receive(m)
	if err == nil && !c.received {
		c.received, c.target = true, auditTarget(m, nil)
	}
	return err
}

// observe writes the access log line of one call and records it in the
// metrics.
func (e *Edge) observe(ctx context.Context, procedure, protocol string, err error, d time.Duration) {
	code := codeOf(err)
	if e.log.Enabled(ctx, slog.LevelDebug) { // not the boxing of its fields on every call
		e.log.Debug("rpc", "request_id", requestIDOf(ctx), "procedure", procedure, "protocol", protocol, "code", code, "duration_ms", d.Milliseconds())
	}
	if e.metrics != nil {
		svc, method := splitProcedure(procedure)
		e.metrics.ObserveRPC(svc, method, code, d)
	}
}

// splitProcedure is the service and method of "/<service>/<method>".
func splitProcedure(procedure string) (service, method string) {
	p := strings.TrimPrefix(procedure, "/")
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i], p[i+1:]
	}
	return p, ""
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

// auditTarget is the id a call acted on: its answer's id (what a create
// made), else its request's (for a stream, its first message's). Which
// field holds it is read from the message's descriptor (idField), so a new
// id field of the protos is audited without a list here to keep current.
func auditTarget(in, out any) string {
	for _, m := range []any{out, in} {
		msg, ok := m.(proto.Message)
		if !ok || msg == nil {
			continue
		}
		r := msg.ProtoReflect()
		if !r.IsValid() {
			continue
		}
		if f := idField(r.Descriptor()); f != nil {
			if v := r.Get(f).String(); v != "" {
				return v
			}
		}
	}
	return ""
}

// idField is the field of md that names what a message is about: its
// lowest-numbered string field named id or ending in _id (the API puts
// the target first: GetSessionRequest.session_id, RollbackSandboxRequest.
// sandbox_id before snapshot_id, Lease.lease_id), or nil.
func idField(md protoreflect.MessageDescriptor) protoreflect.FieldDescriptor {
	var best protoreflect.FieldDescriptor
	fields := md.Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		if f.Kind() != protoreflect.StringKind || f.Cardinality() == protoreflect.Repeated {
			continue
		}
		if n := string(f.Name()); n != "id" && !strings.HasSuffix(n, "_id") {
			continue
		}
		if best == nil || f.Number() < best.Number() {
			best = f
		}
	}
	return best
}
