package grpcedge

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	_ "google.golang.org/grpc/encoding/gzip" // gzip-compressed calls, as connect takes them on the API listener
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The native gRPC transport. Go's net/http HTTP/2 server hands every
// request from its frame reader to its serve loop to a new handler
// goroutine and every written frame back through the serve loop: on a
// small unary call that costs more than the whole HTTP/1.1 exchange of
// the same call. grpc-go's own server transport does less per call, so
// the edge also serves gRPC (and only gRPC) on a listener of its own with
// a grpc.Server whose streaming calls, health and reflection are bridged,
// as raw length-prefixed frames, into the very same connect handlers
// (Edge.Handler), and whose unary calls go straight to the same handler
// methods (nativeunary.go): one set of handlers, wrapping, limits, health
// and reflection, whichever listener a call arrives on.

// NativeServer is a grpc-go server for the edge's services, health and
// reflection: serve it on a listener of its own (Serve). Every call is
// answered by the edge's handlers, which check the key, audit, count and
// answer exactly as over the main listener; a path of no service is
// UNIMPLEMENTED. It serves gRPC only (no gRPC-Web,
// Connect or HTTP API), in cleartext HTTP/2.
func (e *Edge) NativeServer() *grpc.Server { return e.nativeServer(true) }

// nativeServer is NativeServer, with unary calls bridged too unless
// direct (for the benchmark that compares the two).
func (e *Edge) nativeServer(direct bool) *grpc.Server {
	srv := grpc.NewServer(
		grpc.UnknownServiceHandler(e.bridge),
		grpc.ForceServerCodecV2(rawCodec{}),
		// The same bound as connect's (WithReadMaxBytes): a larger message
		// is RESOURCE_EXHAUSTED before any handler runs.
		grpc.MaxRecvMsgSize(e.maxMessageBytes),
		// The main listener's HTTP/2 bounds (net/http's defaults and the
		// service's timeouts): streams per connection, header bytes, the
		// time to a connection's first frames, idle connections.
		grpc.MaxConcurrentStreams(250),
		grpc.MaxHeaderListSize(1<<20),
		grpc.ConnectionTimeout(10*time.Second),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: 2 * time.Minute}),
		// Fixed flow-control windows, net/http's (1 MiB per stream and per
		// connection): they bound what a client may send ahead of a slow
		// handler, and they switch off grpc-go's bandwidth estimation,
		// whose PING would add a round of frames to every small call.
		grpc.InitialWindowSize(1<<20),
		grpc.InitialConnWindowSize(1<<20),
		// Calls run on a few long-lived goroutines, not on a new one each:
		// a new goroutine grows its stack afresh, by copies, down to the
		// store's driver on every call (a net/http HTTP/1.1 connection's
		// goroutine keeps its grown stack from call to call). A call that
		// finds every worker busy (a long stream holds one) gets a
		// goroutine of its own, as without workers.
		grpc.NumStreamWorkers(uint32(4*runtime.GOMAXPROCS(0))), //nolint:gosec // GOMAXPROCS is small and positive
	)
	if !direct {
		return srv
	}
	// Unary RPCs of the edge's services skip the bridge (nativeunary.go).
	descs, err := e.nativeServices()
	if err != nil { // a handler set out of step with its proto: TestNativeUnaryCoversEveryRPC
		e.log.Error("the native listener bridges every call", "err", err)
		return srv
	}
	for _, d := range descs {
		srv.RegisterService(d, nil)
	}
	return srv
}

// rawFrame is one message as its encoded bytes: the bridge hands messages
// through undecoded, connect's codec decodes them.
type rawFrame []byte

// rawCodec passes messages through as bytes (rawFrame).
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	f, ok := v.(rawFrame)
	if !ok {
		return nil, fmt.Errorf("grpcedge: cannot send %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(f)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f, ok := v.(*rawFrame)
	if !ok {
		return fmt.Errorf("grpcedge: cannot receive into %T", v)
	}
	*f = data.Materialize()
	return nil
}

// bridge serves one call of the native server with the edge's handler:
// the call's metadata becomes the request's headers, its messages the
// request body's gRPC frames, and the frames the handler writes are sent
// as they come; the handler's trailers become the call's status.
func (e *Edge) bridge(_ any, stream grpc.ServerStream) error {
	ctx := stream.Context()
	method, ok := grpc.MethodFromServerStream(stream)
	if !ok {
		return status.Error(codes.Internal, "no method")
	}
	r, err := bridgeRequest(ctx, method, stream)
	if err != nil {
		return err
	}
	w := &bridgeWriter{stream: stream, header: make(http.Header)}
	e.mux.ServeHTTP(w, r)
	return w.finish()
}

// bridgeRequest is the HTTP/2 request a gRPC client would have sent for
// the call, its body reading the call's messages.
func bridgeRequest(ctx context.Context, method string, stream grpc.ServerStream) (*http.Request, error) {
	if !strings.HasPrefix(method, "/") {
		return nil, status.Errorf(codes.Unimplemented, "unknown method %q", method)
	}
	h := make(http.Header)
	md, _ := metadata.FromIncomingContext(ctx)
	host := headerOf(h, md)
	h.Set("Content-Type", "application/grpc+proto")
	h.Set("Te", "trailers")
	r := &http.Request{
		Method:        http.MethodPost,
		URL:           &url.URL{Path: method},
		RequestURI:    method,
		Proto:         "HTTP/2.0",
		ProtoMajor:    2,
		Header:        h,
		Body:          &bridgeBody{stream: stream},
		ContentLength: -1,
		Host:          host,
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		r.RemoteAddr = p.Addr.String()
	}
	return r.WithContext(ctx), nil
}

// bridgeBody reads a call's messages as gRPC frames (uncompressed: the
// request says it accepts no compression, and grpc-go has decompressed).
type bridgeBody struct {
	stream grpc.ServerStream
	frame  []byte // what is left of the current frame
	err    error
}

func (b *bridgeBody) Read(p []byte) (int, error) {
	for len(b.frame) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		var m rawFrame
		if err := b.stream.RecvMsg(&m); err != nil {
			if !errors.Is(err, io.EOF) {
				err = fmt.Errorf("grpcedge: receive: %w", err)
			}
			b.err = err
			return 0, err
		}
		b.frame = make([]byte, 5+len(m))
		binary.BigEndian.PutUint32(b.frame[1:5], uint32(len(m)))
		copy(b.frame[5:], m)
	}
	n := copy(p, b.frame)
	b.frame = b.frame[n:]
	return n, nil
}

func (b *bridgeBody) Close() error { return nil }

// bridgeWriter takes the handler's response: its headers become the
// call's header metadata, each complete frame of its body is sent as a
// message when it is written (so flow control holds the handler), and
// its trailers the call's status and trailer metadata.
type bridgeWriter struct {
	stream      grpc.ServerStream
	header      http.Header
	wroteHeader bool
	sentHeader  bool // Flush sent the header metadata
	code        int
	pending     []byte // a frame not yet whole
	err         error  // the send that failed
}

func (w *bridgeWriter) Header() http.Header { return w.header }

func (w *bridgeWriter) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	w.wroteHeader, w.code = true, code
	md := metadata.MD{}
	for k, vs := range w.header {
		lk := strings.ToLower(k)
		if lk == "content-type" || lk == "trailer" || strings.HasPrefix(lk, "grpc-") || strings.HasPrefix(k, http.TrailerPrefix) {
			continue
		}
		md[lk] = append(md[lk], vs...)
	}
	if len(md) > 0 {
		_ = w.stream.SetHeader(md)
	}
}

func (w *bridgeWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.code != http.StatusOK {
		return len(p), nil // a protocol error's body: finish answers it
	}
	n := len(p)
	for len(p) > 0 {
		if len(w.pending) < 5 {
			k := min(5-len(w.pending), len(p))
			w.pending, p = append(w.pending, p[:k]...), p[k:]
			if len(w.pending) < 5 {
				break
			}
		}
		if w.pending[0]&1 != 0 {
			w.err = errors.New("grpcedge: a compressed frame from the handler")
			return 0, w.err
		}
		size := int(binary.BigEndian.Uint32(w.pending[1:5]))
		if w.pending == nil || cap(w.pending) < 5+size {
			w.pending = append(make([]byte, 0, 5+size), w.pending...)
		}
		k := min(5+size-len(w.pending), len(p))
		w.pending, p = append(w.pending, p[:k]...), p[k:]
		if len(w.pending) < 5+size {
			break
		}
		// The transport may still hold the message after SendMsg returns:
		// a new buffer for the next one.
		msg := rawFrame(w.pending[5:])
		w.pending = nil
		if err := w.stream.SendMsg(msg); err != nil {
			w.err = err
			return 0, err
		}
	}
	return n, nil
}

// Flush sends the header metadata if no message has carried it yet (a
// stream's first message may be long in coming); every whole frame is
// sent when written.
func (w *bridgeWriter) Flush() {
	if !w.wroteHeader || w.sentHeader || w.code != http.StatusOK || w.err != nil {
		return
	}
	w.sentHeader = true
	_ = w.stream.SendHeader(nil) // fails only once a message has sent it
}

// finish is the call's end: the status and trailer metadata of the
// handler's trailers (or of its headers, for a trailers-only answer).
func (w *bridgeWriter) finish() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.code != http.StatusOK {
		if w.code == http.StatusNotFound {
			return status.Error(codes.Unimplemented, "unknown service or method")
		}
		return status.Errorf(codes.Internal, "the handler answered HTTP %d", w.code)
	}
	if w.err != nil {
		return w.err
	}
	if len(w.pending) > 0 {
		return status.Error(codes.Internal, "the handler's answer ended inside a message")
	}
	trailers := http.Header{}
	for k, vs := range w.header {
		if tk, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			trailers[textproto.CanonicalMIMEHeaderKey(tk)] = vs
		}
	}
	for _, k := range strings.Split(w.header.Get("Trailer"), ",") { // declared trailers
		if k = strings.TrimSpace(k); k != "" {
			trailers[textproto.CanonicalMIMEHeaderKey(k)] = w.header.Values(k)
		}
	}
	md := metadata.MD{}
	for k, vs := range trailers {
		lk := strings.ToLower(k)
		if !strings.HasPrefix(lk, "grpc-") {
			md[lk] = append(md[lk], vs...)
		}
	}
	if len(md) > 0 {
		w.stream.SetTrailer(md)
	}
	return grpcStatus(trailers)
}

// grpcStatus is the status of a gRPC answer's trailers: nil for OK, the
// status with its details otherwise.
func grpcStatus(t http.Header) error {
	raw := t.Get("Grpc-Status")
	if raw == "" {
		return status.Error(codes.Internal, "the handler's answer has no grpc-status")
	}
	code, err := strconv.ParseUint(raw, 10, 32)
	if err != nil {
		return status.Errorf(codes.Internal, "the handler's grpc-status %q", raw)
	}
	if code == 0 {
		return nil
	}
	if bin := t.Get("Grpc-Status-Details-Bin"); bin != "" {
		b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(bin, "="))
		var s spb.Status
		if err == nil && proto.Unmarshal(b, &s) == nil {
			return status.FromProto(&s).Err()
		}
	}
	msg, err := url.PathUnescape(t.Get("Grpc-Message"))
	if err != nil {
		msg = t.Get("Grpc-Message")
	}
	return status.Error(codes.Code(code), msg)
}

// base64RawStd is v in base64 without padding, as gRPC sends a binary
// metadata value.
func base64RawStd(v string) string { return base64.RawStdEncoding.EncodeToString([]byte(v)) }
