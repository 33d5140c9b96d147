package grpcedge

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	sandboxv1 "genesis.dev/sandbox/gen/genesis/sandbox/v1"

	"genesis.dev/sandbox/internal/auth"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/tenancy"
	"genesis.dev/sandbox/internal/tenant"
)

// apiPackage is the proto package of the public API.
const apiPackage = "genesis.sandbox.v1"

// testEdge is an edge over no control and no jobs: for tests of its
// routing, registration, keys, errors and audit, never of an RPC's work.
// The key "good" is tenant t1's, "admin" an admin's of tenant ops; the
// tenants are t1, t2 and ops.
func testEdge(t testing.TB) (*Edge, *fakeTenancy) {
	t.Helper()
	ft := &fakeTenancy{}
	keys, err := auth.New(auth.Config{Tenants: ft, Keys: map[string]string{"good": "t1", "admin": "ops"}})
	if err != nil {
		t.Fatal(err)
	}
	e := &Edge{tenancy: ft, auth: keys, log: slog.New(slog.DiscardHandler), ready: func(context.Context) bool { return true }}
	e.build(1 << 10)
	return e, ft
}

type fakeTenancy struct {
	mu      sync.Mutex
	records []tenant.AuditRecord
}

// Authenticate knows the keys of the config only (staticTenant); ops is
// an admin tenant.
func (f *fakeTenancy) Authenticate(_ context.Context, hash [32]byte, staticTenant string) (tenant.Principal, error) {
	if staticTenant == "" {
		return tenant.Principal{}, errdefs.WithCode("unauthenticated", fmt.Errorf("invalid API key: %w", errdefs.ErrUnauthenticated))
	}
	return tenant.Principal{Tenant: staticTenant, KeyID: tenant.ConfigKeyID(hash), KeyTenant: staticTenant, Admin: staticTenant == "ops"}, nil
}

func (f *fakeTenancy) GetTenant(_ context.Context, name string) (*tenancy.TenantView, error) {
	if name == "t1" || name == "t2" || name == "ops" {
		return &tenancy.TenantView{}, nil
	}
	return nil, errdefs.WithCode("tenant_not_found", fmt.Errorf("tenant %q: %w", name, errdefs.ErrNotFound))
}

func (f *fakeTenancy) RecordAudit(_ context.Context, r *tenant.AuditRecord) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.records = append(f.records, *r)
	return nil
}

func (f *fakeTenancy) audit() []tenant.AuditRecord {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.records)
}

// TestEveryRPCIsServed: every service of genesis.sandbox.v1 that a
// generated package registers is served by the edge, by a handler set
// that embeds no Unimplemented…Handler, so (the generated interface being
// complete) each of its RPCs has a real method.
func TestEveryRPCIsServed(t *testing.T) {
	e, _ := testEdge(t)
	byName := map[string]service{}
	for _, s := range e.served {
		byName[s.name] = s
	}
	seen := 0
	protoregistry.GlobalFiles.RangeFilesByPackage(apiPackage, func(fd protoreflect.FileDescriptor) bool {
		svcs := fd.Services()
		for i := range svcs.Len() {
			sd := svcs.Get(i)
			seen++
			s, ok := byName[string(sd.FullName())]
			if !ok {
				t.Errorf("%s (%s) is not served by the edge: add it to Edge.services", sd.FullName(), fd.Path())
				continue
			}
			typ := reflect.TypeOf(s.impl)
			if typ.Kind() == reflect.Pointer {
				typ = typ.Elem()
			}
			for f := range typ.Fields() {
				if f.Anonymous && strings.HasPrefix(f.Type.Name(), "Unimplemented") {
					t.Errorf("%s: its handler set %s embeds %s, so some RPCs answer UNIMPLEMENTED", sd.FullName(), typ, f.Type.Name())
				}
			}
			methods := sd.Methods()
			for j := range methods.Len() {
				name := string(methods.Get(j).Name())
				if _, ok := reflect.TypeOf(s.impl).MethodByName(name); !ok {
					t.Errorf("%s/%s has no method on %s", sd.FullName(), name, typ)
				}
			}
		}
		return true
	})
	if seen == 0 {
		t.Fatal("no service of " + apiPackage + " is registered: the generated packages are not linked")
	}
	for name := range byName {
		if _, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name)); err != nil {
			t.Errorf("the edge serves %s, which no .proto declares", name)
		}
	}
}

// TestAuditTargetOfEveryRPC: for every RPC of genesis.sandbox.v1, the
// audit target is read from its messages' descriptors: the answer's id
// when it has one, else the request's lowest-numbered id field (id or
// *_id), whatever its name; and every RPC that may change something names
// a target in its request or its answer.
func TestAuditTargetOfEveryRPC(t *testing.T) {
	t.Parallel()
	// fill sets every top-level string field named id or *_id of m to
	// prefix+name, and returns the names in field-number order.
	fill := func(m protoreflect.Message, prefix string) []string {
		var names []string
		fields := m.Descriptor().Fields()
		byNumber := map[protoreflect.FieldNumber]string{}
		var nums []protoreflect.FieldNumber
		for i := range fields.Len() {
			f := fields.Get(i)
			n := string(f.Name())
			if f.Kind() != protoreflect.StringKind || f.IsList() || (n != "id" && !strings.HasSuffix(n, "_id")) {
				continue
			}
			m.Set(f, protoreflect.ValueOfString(prefix+n))
			byNumber[f.Number()] = n
			nums = append(nums, f.Number())
		}
		slices.Sort(nums)
		for _, num := range nums {
			names = append(names, byNumber[num])
		}
		return names
	}
	rpcs := 0
	protoregistry.GlobalFiles.RangeFilesByPackage(apiPackage, func(fd protoreflect.FileDescriptor) bool {
		svcs := fd.Services()
		for i := range svcs.Len() {
			methods := svcs.Get(i).Methods()
			for j := range methods.Len() {
				md := methods.Get(j)
				rpcs++
				in, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
				if err != nil {
					t.Fatal(err)
				}
				out, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
				if err != nil {
					t.Fatal(err)
				}
				req, resp := in.New(), out.New()
				inIDs, outIDs := fill(req, "in:"), fill(resp, "out:")
				want := ""
				switch {
				case len(outIDs) > 0:
					want = "out:" + outIDs[0]
				case len(inIDs) > 0:
					want = "in:" + inIDs[0]
				}
				if got := auditTarget(req.Interface(), resp.Interface()); got != want {
					t.Errorf("%s: audit target %q, want %q", md.FullName(), got, want)
				}
				if len(inIDs) > 0 {
					if got := auditTarget(req.Interface(), nil); got != "in:"+inIDs[0] {
						t.Errorf("%s without an answer: audit target %q, want %q", md.FullName(), got, "in:"+inIDs[0])
					}
				}
				// An RPC that may change something names what it changed
				// (CreateSandbox and AcquireLease by their answer).
				if md.Options() == nil || !mutatingMethod(md) {
					continue
				}
				if want == "" {
					t.Errorf("%s may change something but neither %s nor %s has an id field: the audit log cannot name its target",
						md.FullName(), md.Input().Name(), md.Output().Name())
				}
			}
		}
		return true
	})
	if rpcs == 0 {
		t.Fatal("no RPC of " + apiPackage + " is registered")
	}
	// The ids named in the issue, each alone in its request.
	for _, tc := range []struct {
		msg  proto.Message
		want string
	}{
		{&sandboxv1.GetSessionRequest{SessionId: "ses_1"}, "ses_1"},
		{&sandboxv1.RunCodeRequest{ContextId: "ctx_1"}, "ctx_1"},
		{&sandboxv1.DeleteSnapshotRequest{SnapshotId: "snap_1"}, "snap_1"},
		{&sandboxv1.GetArtifactRequest{ArtifactId: "art_1"}, "art_1"},
		{&sandboxv1.RollbackSandboxRequest{SandboxId: "sbx_1", SnapshotId: "snap_1"}, "sbx_1"},
	} {
		if got := auditTarget(tc.msg, (*sandboxv1.Sandbox)(nil)); got != tc.want {
			t.Errorf("auditTarget(%T) = %q, want %q", tc.msg, got, tc.want)
		}
	}
}

// mutatingMethod reports whether md is not declared free of side effects
// (as mutating does for a connect.Spec).
func mutatingMethod(md protoreflect.MethodDescriptor) bool {
	opts, _ := md.Options().(*descriptorpb.MethodOptions)
	return opts.GetIdempotencyLevel() != descriptorpb.MethodOptions_NO_SIDE_EFFECTS
}
