package grpcedge

import (
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"genesis.dev/sandbox/internal/slowlog"
)

// The slow request log covers the edge's unary calls as it covers the
// HTTP API's requests (internal/slowlog): a call that takes longer than
// the threshold beyond the wait its caller asked for logs one "slow
// request" line, its route the procedure. Streaming calls last as long as
// their caller keeps them, as the HTTP API's streams do: never slow.

// slowBegin starts the slow request record of a unary call (nil while the
// log is off).
func (e *Edge) slowBegin(start time.Time) *slowlog.Request {
	if !e.slow.On() {
		return nil
	}
	return e.slow.Begin(start)
}

// allow gives q the wait the call with request message in asked for, as
// over HTTP: an exec's timeout_ms (or the default exec timeout), a
// create's or lease's wait_seconds.
func (e *Edge) allow(q *slowlog.Request, in any) {
	m, ok := in.(proto.Message)
	if !ok || m == nil || !m.ProtoReflect().IsValid() {
		return
	}
	r := m.ProtoReflect()
	if f := r.Descriptor().Fields().ByName("timeout_ms"); f != nil && f.Kind() == protoreflect.Int64Kind {
		if ms := r.Get(f).Int(); ms > 0 {
			q.Allow(time.Duration(ms) * time.Millisecond)
		} else if waitsForItsCommand[r.Descriptor().Name()] {
			q.Allow(e.execTimeout)
		}
	}
	if f := r.Descriptor().Fields().ByName("wait_seconds"); f != nil && f.Kind() == protoreflect.Int64Kind {
		q.Allow(time.Duration(r.Get(f).Int()) * time.Second)
	}
}

// waitsForItsCommand names the requests whose call waits for a command
// whose limit, when the request gives none, is the service's default exec
// timeout (a background job's start answers at once).
var waitsForItsCommand = map[protoreflect.Name]bool{"ExecRequest": true, "ExecInSessionRequest": true, "RunCodeRequest": true}

// slowEnd logs the call if it was slow: its tenant and sandbox, the wait
// it asked for and the bytes of its messages (each MiB allows a second, as
// over HTTP). A call within the threshold alone cannot be slow: only a
// longer one's messages are read for them, off every fast call's path.
func (e *Edge) slowEnd(q *slowlog.Request, c call, tenant, code, requestID string, in, out any) {
	if q == nil {
		return
	}
	if !e.slow.Past(q) { // not slow whatever it was allowed: skip the rest
		return
	}
	e.allow(q, in)
	q.SetTenant(tenant)
	q.SetSandbox(sandboxOf(in, out))
	for _, m := range []any{in, out} {
		if pm, ok := m.(proto.Message); ok && pm != nil {
			q.Moved(proto.Size(pm))
		}
	}
	e.slow.EndCall(q, c.protocol, c.procedure, code, requestID)
}

// sandboxOf is the sandbox a call is about: its request's sandbox_id, the
// sandbox it answered with (a create, a get), its answer's sandbox_id (a
// lease), or the id of a request on a sandbox (a delete).
func sandboxOf(in, out any) string {
	if id := stringField(in, "sandbox_id"); id != "" {
		return id
	}
	if pm, ok := out.(proto.Message); ok && pm != nil && pm.ProtoReflect().Descriptor().Name() == "Sandbox" {
		return stringField(out, "id")
	}
	if id := stringField(out, "sandbox_id"); id != "" {
		return id
	}
	if pm, ok := in.(proto.Message); ok && pm != nil && strings.Contains(string(pm.ProtoReflect().Descriptor().Name()), "Sandbox") {
		return stringField(in, "id")
	}
	return ""
}

// stringField is the value of m's singular string field name, or "".
func stringField(m any, name protoreflect.Name) string {
	pm, ok := m.(proto.Message)
	if !ok || pm == nil {
		return ""
	}
	r := pm.ProtoReflect()
	if !r.IsValid() {
		return ""
	}
	f := r.Descriptor().Fields().ByName(name)
	if f == nil || f.Kind() != protoreflect.StringKind || f.Cardinality() == protoreflect.Repeated {
		return ""
	}
	return r.Get(f).String()
}
