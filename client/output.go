package client

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"

	"genesis.dev/sandbox/api"
)

// decodeOutput decodes the data of a stdout or stderr event into its
// stream offset and a new slice of its bytes (data itself is the reader's
// memory). The data is either the text form "<offset>\n<bytes>" or the
// JSON form {"offset":N,"data":"<base64>"}.
//
// The JSON form as the service writes it (those two keys in that order, no
// white space, a plain decimal offset, base64 without escapes) is parsed by
// hand and decoded straight into the result; anything else goes through
// encoding/json, which gives the same answer for the service's form
// (FuzzDecodeOutput checks it), only slower: for a MiB of output,
// json.Unmarshal's validation and unquoting of the string cost more than
// the base64 decoding itself.
func decodeOutput(data []byte) (int64, []byte, error) {
	if head, text, ok := bytes.Cut(data, []byte{'\n'}); ok && isDigits(head) {
		off, err := strconv.ParseInt(string(head), 10, 64)
		if err != nil {
			return 0, nil, err
		}
		return off, bytes.Clone(text), nil // not nil for empty text
	}
	if off, b, ok := decodeOutputJSON(data); ok {
		return off, b, nil
	}
	var o api.OutputEvent
	if err := json.Unmarshal(data, &o); err != nil {
		return 0, nil, err
	}
	b, err := base64.StdEncoding.DecodeString(o.Data)
	if err != nil {
		return 0, nil, err
	}
	if o.Offset < 0 {
		return 0, nil, errors.New("negative offset")
	}
	return o.Offset, b, nil
}

const (
	outputPrefix = `{"offset":`
	outputData   = `,"data":"`
	outputSuffix = `"}`
)

// decodeOutputJSON is the fast path of decodeOutput: ok is false when data
// is not exactly the service's form, or its base64 does not decode.
func decodeOutputJSON(data []byte) (off int64, b []byte, ok bool) {
	rest, found := bytes.CutPrefix(data, []byte(outputPrefix))
	if !found {
		return 0, nil, false
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	// JSON numbers have no leading zeros; the offset must fit an int64.
	if i == 0 || i > 1 && rest[0] == '0' {
		return 0, nil, false
	}
	off, err := strconv.ParseInt(string(rest[:i]), 10, 64)
	if err != nil {
		return 0, nil, false
	}
	rest, found = bytes.CutPrefix(rest[i:], []byte(outputData))
	if !found || !bytes.HasSuffix(rest, []byte(outputSuffix)) {
		return 0, nil, false
	}
	b64 := rest[:len(rest)-len(outputSuffix)]
	// The standard decoder skips CR and LF, which a JSON string cannot
	// hold unescaped: with either present, encoding/json decides. Any other
	// byte outside the base64 alphabet (a quote, a backslash) fails the
	// decoding, and so also goes to encoding/json.
	if bytes.IndexByte(b64, '\n') >= 0 || bytes.IndexByte(b64, '\r') >= 0 {
		return 0, nil, false
	}
	b = make([]byte, base64.StdEncoding.DecodedLen(len(b64)))
	n, err := base64.StdEncoding.Decode(b, b64)
	if err != nil {
		return 0, nil, false
	}
	return off, b[:n], true
}
