package layering

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// jsonStructs returns the position of every struct type in f, named or
// not, with a field that has a json tag.
func jsonStructs(fset *token.FileSet, f *ast.File) []string {
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		st, ok := n.(*ast.StructType)
		if !ok {
			return true
		}
		for _, fld := range st.Fields.List {
			if fld.Tag == nil {
				continue
			}
			if _, ok := reflect.StructTag(strings.Trim(fld.Tag.Value, "`")).Lookup("json"); ok {
				out = append(out, fset.Position(st.Pos()).String())
				break
			}
		}
		return true
	})
	return out
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return strings.TrimSuffix(strings.TrimSpace(string(gomod)), "/go.mod")
}

// TestClientDeclaresNoWireTypes checks that the SDK declares no struct
// with json tags: every wire type is api's, and client re-exports it with
// an alias, so the service and the SDK cannot drift apart.
func TestClientDeclaresNoWireTypes(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(moduleRoot(t), "client", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no client/*.go files (%v)", err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, pos := range jsonStructs(fset, f) {
			t.Errorf("%s: a struct with json tags in the SDK; declare the wire type in package api and alias it in client", pos)
		}
	}
}

// TestJSONStructsFinds checks that jsonStructs finds named, anonymous and
// nested structs with json tags and nothing else, so that
// TestClientDeclaresNoWireTypes can fail.
func TestJSONStructsFinds(t *testing.T) {
	t.Parallel()
	src := `package client

type Options struct {
	Cursor string
	Limit  int ` + "`yaml:\"limit\"`" + `
}

type Wire struct {
	ID string ` + "`json:\"id\"`" + `
}

func f() any {
	var out struct {
		Items []int ` + "`json:\"items,omitempty\"`" + `
	}
	return out
}

type Outer struct {
	Inner struct {
		N int ` + "`json:\"n\"`" + `
	}
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := jsonStructs(fset, f)
	want := []string{"x.go:8:11", "x.go:13:10", "x.go:20:8"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("jsonStructs = %q, want %q", got, want)
	}
}
