package client

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"runtime"
	"strconv"
	"sync"

	simd "github.com/segmentio/asm/base64"
	"golang.org/x/sys/cpu"

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
//
// owned says the caller may keep data: the text form's bytes are then
// returned in place, not copied.
func decodeOutput(data []byte, owned bool) (int64, []byte, error) {
	if head, text, ok := bytes.Cut(data, []byte{'\n'}); ok && isDigits(head) {
		off, err := strconv.ParseInt(string(head), 10, 64)
		if err != nil {
			return 0, nil, err
		}
		if !owned {
			text = bytes.Clone(text)
		}
		return off, text[:len(text):len(text)], nil // not nil for empty text
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
	n, ok := decodeBase64(b, b64)
	if !ok {
		return 0, nil, false
	}
	return off, b[:n], true
}

// base64Values maps a byte to its value in the standard base64 alphabet,
// or to 0xFFFFFFFF (high bits set) for any other byte.
var base64Values = sync.OnceValue(func() *[256]uint32 {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	var t [256]uint32
	for i := range t {
		t[i] = 0xFFFFFFFF
	}
	for i := range len(alphabet) {
		t[alphabet[i]] = uint32(i)
	}
	return &t
})

// vectorBase64 says whether decodeBase64 uses github.com/segmentio/asm's
// vector decoder: on amd64 with AVX2 (without it, that package falls back
// to encoding/base64, slower than the table below) and on arm64. It
// decodes ≈ 10 GB/s on a 2-vCPU host against ≈ 2.6 for the table. A
// variable, so that the tests run both paths.
var vectorBase64 = runtime.GOARCH == "amd64" && cpu.X86.HasAVX2 || runtime.GOARCH == "arm64"

// decodeBase64 decodes src (standard, padded base64, no CR or LF) into
// dst, which holds base64.StdEncoding.DecodedLen(len(src)) bytes, and
// returns the length decoded. It gives what base64.StdEncoding.Decode
// gives for the same input, faster: with the vector decoder, or else about
// three times as fast (the standard decoder checks every character with a
// branch; this one checks eight at once); ok is false for any input the
// standard decoder refuses, which the caller leaves to that decoder and
// its error.
func decodeBase64(dst, src []byte) (n int, ok bool) {
	if vectorBase64 {
		// The vector decoder stops at the first byte outside the
		// alphabet and leaves the rest to encoding/base64, so an input
		// that decoder refuses is refused here too.
		n, err := simd.StdEncoding.Decode(dst, src)
		return n, err == nil
	}
	t := base64Values()
	si, di := 0, 0
	// Each step decodes eight characters into six bytes, written as eight
	// (the last two are overwritten by the next step, or by the tail).
	for ; si+8 < len(src) && di+8 <= len(dst); si, di = si+8, di+6 {
		s := src[si : si+8 : si+8]
		v := t[s[0]]<<18 | t[s[1]]<<12 | t[s[2]]<<6 | t[s[3]]
		w := t[s[4]]<<18 | t[s[5]]<<12 | t[s[6]]<<6 | t[s[7]]
		if (v|w)&0xFF000000 != 0 {
			return 0, false
		}
		binary.BigEndian.PutUint64(dst[di:], uint64(v)<<40|uint64(w)<<16)
	}
	m, err := base64.StdEncoding.Decode(dst[di:], src[si:])
	if err != nil {
		return 0, false
	}
	return di + m, true
}
