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

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

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
func testEdge(t *testing.T) (*Edge, *fakeTenancy) {
	t.Helper()
	ft := &fakeTenancy{}
	e := &Edge{tenancy: ft, log: slog.New(slog.DiscardHandler), ready: func(context.Context) bool { return true }, auth: func(_ context.Context, key string) (tenant.Principal, error) {
		switch key {
		case "good":
			return tenant.Principal{Tenant: "t1", KeyID: "key_good", KeyTenant: "t1"}, nil
		case "admin":
			return tenant.Principal{Tenant: "ops", KeyID: "key_admin", KeyTenant: "ops", Admin: true}, nil
		}
		return tenant.Principal{}, errdefs.WithCode("unauthenticated", fmt.Errorf("unknown API key: %w", errdefs.ErrUnauthenticated))
	}}
	e.build(1 << 10)
	return e, ft
}

type fakeTenancy struct {
	mu      sync.Mutex
	records []tenant.AuditRecord
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
