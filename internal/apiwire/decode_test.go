package apiwire

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/errdefs"
)

// TestDecodeError: what encoding/json says of a bad body becomes a
// sentence naming the field and the JSON it wants, never a Go type, with
// the class of an invalid argument and without its text appended.
func TestDecodeError(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body string
		v    any
		want string
	}{
		{`{"profile":"p","snapshot":"s"}`, &api.CreateSandboxRequest{}, `unknown field "snapshot"; did you mean "snapshot_id"?`},
		{`{"profle":"p"}`, &api.CreateSandboxRequest{}, `unknown field "profle"; did you mean "profile"?`},
		{`{"zzzzzzzz":1}`, &api.CreateSandboxRequest{}, `unknown field "zzzzzzzz"`},
		{`{"command":"ls"}`, &api.ExecRequest{}, `field "command": want an array of strings, got string`},
		{`{"timeout_ms":"5"}`, &api.ExecRequest{}, `field "timeout_ms": want an integer, got string`},
		{`{"profile":"p","resources":{"cpu":"lots"}}`, &api.CreateSandboxRequest{}, `field "resources.cpu": want a number, got string`},
		{`[]`, &api.CreateSandboxRequest{}, `the request body must be an object, got array`},
		{`{"profile":`, &api.CreateSandboxRequest{}, `malformed JSON body: it ends before its JSON value does`},
		{`{"profile" "p"}`, &api.CreateSandboxRequest{}, `malformed JSON body at byte 12: invalid character '"' after object key`},
	} {
		dec := json.NewDecoder(strings.NewReader(c.body))
		dec.DisallowUnknownFields()
		err := dec.Decode(c.v)
		if err == nil {
			t.Fatalf("%s: decoded", c.body)
		}
		got := DecodeError(err, c.v)
		if got.Error() != c.want || !errdefs.Is(got, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: %q (%v), want %q, an invalid argument", c.body, got, errdefs.Code(got), c.want)
		}
		for _, bad := range []string{"Go ", "api.", "json:", "invalid argument"} {
			if strings.Contains(got.Error(), bad) {
				t.Errorf("%s: %q names %q", c.body, got, bad)
			}
		}
	}
}

// TestJSONKind: each Go type a wire field has reads as the JSON it wants.
func TestJSONKind(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		v    any
		want string
	}{
		{"", "a string"}, {true, "true or false"}, {int64(0), "an integer"}, {uint32(0), "a non-negative integer"},
		{0.5, "a number"}, {[]byte{}, "a base64 string"}, {[]string{}, "an array of strings"}, {[][]int{}, "an array of arrays of integers"},
		{map[string]string{}, "an object"}, {api.Resources{}, "an object"}, {[]bool{}, "an array of booleans"}, {new(*int), "an integer"},
	} {
		if got := jsonKind(reflect.TypeOf(c.v)); got != c.want {
			t.Errorf("%T: %q, want %q", c.v, got, c.want)
		}
	}
}
