package grpcedge

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"genesis.dev/sandbox/internal/tenant"
)

// apiPackage is the proto package of the public API.
const apiPackage = "genesis.sandbox.v1"

// testEdge is an edge over nothing: for tests of its routing and
// registration, never of an RPC's work.
func testEdge(t *testing.T) *Edge {
	t.Helper()
	e := &Edge{auth: func(context.Context, string) (tenant.Principal, error) { return tenant.Principal{}, nil }}
	e.served = e.services(nil)
	for _, s := range e.served {
		e.names = append(e.names, s.name)
	}
	return e
}

// TestEveryRPCIsServed: every service of genesis.sandbox.v1 that a
// generated package registers is served by the edge, by a handler set
// that embeds no Unimplemented…Handler, so (the generated interface being
// complete) each of its RPCs has a real method.
func TestEveryRPCIsServed(t *testing.T) {
	e := testEdge(t)
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
