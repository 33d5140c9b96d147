package apiwire

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"genesis.dev/sandbox/internal/errdefs"
)

// DecodeError turns what encoding/json said of a request body decoded into
// v into an invalid argument a person can act on: the field and the JSON
// type it wants instead of Go's type names, the byte where the syntax
// broke, and for an unknown field the request's field it most likely
// meant. The class's text is not appended: the sentence says it.
func DecodeError(err error, v any) error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
		msg string
	)
	switch {
	case errors.As(err, &syn):
		msg = fmt.Sprintf("malformed JSON body at byte %d: %s", syn.Offset, syn.Error())
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		msg = "malformed JSON body: it ends before its JSON value does"
	case errors.As(err, &typ) && typ.Field == "":
		msg = fmt.Sprintf("the request body must be %s, got %s", jsonKind(typ.Type), typ.Value)
	case errors.As(err, &typ):
		msg = fmt.Sprintf("field %q: want %s, got %s", typ.Field, jsonKind(typ.Type), typ.Value)
	default:
		name, ok := strings.CutPrefix(err.Error(), `json: unknown field "`)
		if !ok {
			msg = "malformed JSON body: " + strings.TrimPrefix(err.Error(), "json: ")
			break
		}
		name = strings.TrimSuffix(name, `"`)
		msg = fmt.Sprintf("unknown field %q", name)
		if near := nearestField(name, reflect.TypeOf(v)); near != "" {
			msg += fmt.Sprintf("; did you mean %q?", near)
		}
	}
	return errdefs.Mark(errors.New(msg), errdefs.ErrInvalidArgument)
}

// ProblemInstance is a problem's instance, the request's path: at most
// 256 bytes of it, so that an answer does not echo a huge path back.
func ProblemInstance(path string) string {
	if len(path) <= 256 {
		return path
	}
	return strings.ToValidUTF8(path[:256], "") + "…"
}

// jsonKind names the JSON value that decodes into t.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "an array of " + plural(jsonKind(t.Elem()))
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another JSON value"
}

// plural is jsonKind's answer for several values: "a string" → "strings".
func plural(kind string) string {
	switch kind {
	case "true or false":
		return "booleans"
	case "another JSON value":
		return "JSON values"
	}
	kind = strings.TrimPrefix(strings.TrimPrefix(kind, "a "), "an ")
	if rest, ok := strings.CutPrefix(kind, "array of "); ok {
		return "arrays of " + rest
	}
	return kind + "s"
}

// nearestField is the JSON name among t's fields (at any depth) that name
// most likely misspells or shortens: the one it is a part of, else one
// within two edits of it; "" when none is near.
func nearestField(name string, t reflect.Type) string {
	fields := map[string]bool{}
	jsonFields(t, fields, map[reflect.Type]bool{})
	best, bestDist := "", 3
	for f := range fields {
		d := editDistance(strings.ToLower(name), f)
		if d > 0 && len(name) >= 3 && strings.Contains(f, strings.ToLower(name)) {
			d = 1 // a part of the name: "snapshot" for "snapshot_id"
		}
		if d < bestDist || d == bestDist && f < best {
			best, bestDist = f, d
		}
	}
	return best
}

// jsonFields adds the JSON names of t's fields, and of the structs below
// them, to into.
func jsonFields(t reflect.Type, into map[string]bool, seen map[reflect.Type]bool) {
	for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map) {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
			continue
		case f.Anonymous && name == "":
			jsonFields(f.Type, into, seen)
			continue
		case name == "":
			name = f.Name
		}
		into[name] = true
		jsonFields(f.Type, into, seen)
	}
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
