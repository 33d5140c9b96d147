package grpcedge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	"connectrpc.com/connect"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/anypb"
)

// The native listener's unary path. Bridged, a unary call costs the
// building of an HTTP request, connect's gRPC protocol over it (headers,
// envelopes, trailers written as text) and the parsing of those trailers
// back into a status: more CPU than the HTTP API spends on the same
// exec. So on the native listener every unary RPC of the edge's services
// is a method of a grpc.ServiceDesc whose handler decodes the message,
// wraps the call as the interceptor wraps it (Edge.unary: request id, key,
// log, metrics, audit, errors) and calls the very method of the service's
// connect handler set (the same implementation the connect handler
// calls: no second copy of any RPC); its answer's headers, trailers and
// error are sent as connect's gRPC protocol sends them. Streaming RPCs,
// health and reflection keep the bridge (native.go).

// nativeServices are the grpc-go descriptions of the edge's services for
// the native listener: every unary method served by nativeUnary, every
// streaming one by the bridge.
func (e *Edge) nativeServices() ([]*grpc.ServiceDesc, error) {
	descs := make([]*grpc.ServiceDesc, 0, len(e.served))
	for _, s := range e.served {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(s.name))
		if err != nil {
			return nil, fmt.Errorf("grpcedge: the descriptor of %s: %w", s.name, err)
		}
		sd, ok := d.(protoreflect.ServiceDescriptor)
		if !ok {
			return nil, fmt.Errorf("grpcedge: %s is no service", s.name)
		}
		gd := &grpc.ServiceDesc{ServiceName: s.name, HandlerType: (*any)(nil)}
		methods := sd.Methods()
		for i := range methods.Len() {
			md := methods.Get(i)
			if md.IsStreamingClient() || md.IsStreamingServer() {
				gd.Streams = append(gd.Streams, grpc.StreamDesc{
					StreamName: string(md.Name()), Handler: e.bridge,
					ServerStreams: md.IsStreamingServer(), ClientStreams: md.IsStreamingClient(),
				})
				continue
			}
			u, err := e.newNativeUnary(s, md)
			if err != nil {
				return nil, err
			}
			gd.Methods = append(gd.Methods, grpc.MethodDesc{MethodName: string(md.Name()), Handler: u.handle})
		}
		descs = append(descs, gd)
	}
	return descs, nil
}

// nativeUnary serves one unary RPC on the native listener.
type nativeUnary struct {
	edge *Edge
	call call
	in   protoreflect.MessageType
	// fn is the method of the service's handler set; req the type of its
	// request (*connect.Request[T]) and msg the index of the field Msg in
	// connect.Request.
	fn  reflect.Value
	req reflect.Type
	msg int
}

var (
	contextType     = reflect.TypeFor[context.Context]()
	anyRequestType  = reflect.TypeFor[connect.AnyRequest]()
	anyResponseType = reflect.TypeFor[connect.AnyResponse]()
	errorType       = reflect.TypeFor[error]()
)

// newNativeUnary finds the method of md in s's handler set: it must be
// func(context.Context, *connect.Request[In]) (*connect.Response[Out],
// error), as connect-go generates the handler interfaces.
func (e *Edge) newNativeUnary(s service, md protoreflect.MethodDescriptor) (*nativeUnary, error) {
	procedure := "/" + s.name + "/" + string(md.Name())
	fn := reflect.ValueOf(s.impl).MethodByName(string(md.Name()))
	if !fn.IsValid() {
		return nil, fmt.Errorf("grpcedge: %s has no handler", procedure)
	}
	ft := fn.Type()
	if ft.NumIn() != 2 || ft.In(0) != contextType || !ft.In(1).Implements(anyRequestType) || ft.In(1).Kind() != reflect.Pointer ||
		ft.NumOut() != 2 || !ft.Out(0).Implements(anyResponseType) || ft.Out(1) != errorType {
		return nil, fmt.Errorf("grpcedge: the handler of %s is a %s, not a connect unary method", procedure, ft)
	}
	f, ok := ft.In(1).Elem().FieldByName("Msg")
	if !ok || len(f.Index) != 1 {
		return nil, fmt.Errorf("grpcedge: the request of %s has no Msg field", procedure)
	}
	in, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	if err != nil {
		return nil, fmt.Errorf("grpcedge: the input of %s: %w", procedure, err)
	}
	if reflect.TypeOf(in.Zero().Interface()) != f.Type {
		return nil, fmt.Errorf("grpcedge: the handler of %s takes %s, the RPC %s", procedure, f.Type, md.Input().FullName())
	}
	idem, _ := md.Options().(*descriptorpb.MethodOptions)
	noSideEffects := idem.GetIdempotencyLevel() == descriptorpb.MethodOptions_NO_SIDE_EFFECTS
	return &nativeUnary{
		edge: e,
		call: call{procedure: procedure, protocol: connect.ProtocolGRPC, mutating: !noSideEffects},
		in:   in, fn: fn, req: ft.In(1).Elem(), msg: f.Index[0],
	}, nil
}

// handle is the grpc.MethodDesc handler: decode, wrap, call, answer.
func (u *nativeUnary) handle(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	var raw rawFrame
	if err := dec(&raw); err != nil {
		return nil, err
	}
	in := u.in.New().Interface()
	if err := proto.Unmarshal(raw, in); err != nil {
		// As connect answers a message it cannot decode: before the
		// interceptor, so neither logged as a call nor audited.
		return nil, status.Errorf(codes.InvalidArgument, "unmarshal into %T: %v", in, err)
	}
	rv := reflect.New(u.req)
	rv.Elem().Field(u.msg).Set(reflect.ValueOf(in))
	req := rv.Interface().(connect.AnyRequest)
	md, _ := metadata.FromIncomingContext(ctx)
	headerOf(req.Header(), md)
	c := u.call
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		c.remote = p.Addr.String()
	}
	resp, err := u.edge.unary(ctx, c, req.Header(), in, func(ctx context.Context) (_ connect.AnyResponse, err error) {
		defer func() {
			// connect's WithRecover, for the same handlers and at the same
			// place (inside the interceptor): a panic is logged and answered
			// INTERNAL, never the end of the process.
			if v := recover(); v != nil {
				err = u.edge.recovered(ctx, c.procedure, v)
			}
		}()
		res := u.fn.Call([]reflect.Value{reflect.ValueOf(ctx), rv})
		if err, _ := res[1].Interface().(error); err != nil {
			return nil, err
		}
		resp, _ := res[0].Interface().(connect.AnyResponse)
		if resp == nil || reflect.ValueOf(resp).IsNil() {
			return nil, errors.New("grpcedge: " + c.procedure + " answered nothing")
		}
		return resp, nil
	})
	if err != nil {
		return nil, grpcError(ctx, err)
	}
	msg, ok := resp.Any().(proto.Message)
	if !ok {
		return nil, status.Errorf(codes.Internal, "%s answered a %T", c.procedure, resp.Any())
	}
	b, err := proto.Marshal(msg)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "marshal %T: %v", msg, err)
	}
	if h := metadataOf(resp.Header()); len(h) > 0 {
		_ = grpc.SetHeader(ctx, h)
	}
	if t := metadataOf(resp.Trailer()); len(t) > 0 {
		_ = grpc.SetTrailer(ctx, t)
	}
	return rawFrame(b), nil
}

// grpcError is err as connect's gRPC protocol sends it: its code, message
// and details in the status, its metadata as trailer metadata. An error
// that is no *connect.Error is UNKNOWN with its text, as connect answers
// it.
func grpcError(ctx context.Context, err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return status.Error(codes.Unknown, err.Error())
	}
	if t := metadataOf(ce.Meta()); len(t) > 0 {
		_ = grpc.SetTrailer(ctx, t)
	}
	s := &spb.Status{Code: int32(ce.Code()), Message: ce.Message()} //nolint:gosec // connect's codes are gRPC's
	for _, d := range ce.Details() {
		s.Details = append(s.Details, &anypb.Any{TypeUrl: "type.googleapis.com/" + d.Type(), Value: d.Bytes()})
	}
	return status.FromProto(s).Err()
}

// headerOf adds md, a call's metadata, to h as the request headers a gRPC
// client would have sent (binary values base64, as on the wire), less the
// protocol's own; it returns the call's authority.
func headerOf(h http.Header, md metadata.MD) (authority string) {
	for k, vs := range md {
		switch {
		case k == ":authority":
			if len(vs) > 0 {
				authority = vs[0]
			}
			continue
		case strings.HasPrefix(k, ":"), k == "content-type", k == "te", strings.HasPrefix(k, "grpc-"):
			continue
		}
		ck := http.CanonicalHeaderKey(k)
		for _, v := range vs {
			if strings.HasSuffix(k, "-bin") { // grpc-go decoded it; connect decodes again
				v = base64RawStd(v)
			}
			h[ck] = append(h[ck], v)
		}
	}
	return authority
}

// metadataOf is the metadata of a handler's response headers or trailers,
// less the protocol's own (as connect leaves them out).
func metadataOf(h http.Header) metadata.MD {
	var md metadata.MD
	for k, vs := range h {
		lk := strings.ToLower(k)
		if len(vs) == 0 || lk == "content-type" || lk == "trailer" || strings.HasPrefix(lk, "grpc-") || strings.HasPrefix(lk, "connect-") {
			continue
		}
		if md == nil {
			md = metadata.MD{}
		}
		md[lk] = append(md[lk], vs...)
	}
	return md
}
