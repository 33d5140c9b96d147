package grpcedge

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"genesis.dev/sandbox/internal/errdefs"
)

// TestSendChunks: a download is cut in messages of at most chunkBytes,
// contiguous from its offset; an empty one is one empty message (it
// carries the size); a source that ends short of (or goes past) what it
// announced is an error, never a short success.
func TestSendChunks(t *testing.T) {
	t.Parallel()
	data := bytes.Repeat([]byte("0123456789abcdef"), (2*chunkBytes+100)/16+1)
	data = data[:2*chunkBytes+100]
	for _, tc := range []struct {
		name    string
		src     []byte
		want    int64
		msgs    int
		wantErr bool
	}{
		{"whole", data, int64(len(data)), 3, false},
		{"unknown length", data, -1, 3, false},
		{"empty", nil, 0, 1, false},
		{"exact chunk", data[:chunkBytes], chunkBytes, 1, false},
		{"short source", data[:1000], 2000, 1, true},
		{"long source", data[:3000], 2000, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got bytes.Buffer
			msgs, firsts := 0, 0
			err := sendChunks(bytes.NewReader(tc.src), 7, tc.want, func(first bool, off int64, b []byte) error {
				if first {
					firsts++
				}
				if off != 7+int64(got.Len()) {
					t.Errorf("message %d at offset %d, want %d", msgs, off, 7+got.Len())
				}
				if len(b) > chunkBytes {
					t.Errorf("message of %d bytes", len(b))
				}
				msgs++
				got.Write(b)
				return nil
			})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				if !errors.Is(err, errdefs.ErrUnavailable) || !strings.Contains(err.Error(), "2000") {
					t.Errorf("err = %v; want unavailable naming the announced length", err)
				}
				return
			}
			if msgs != tc.msgs || firsts != 1 || !bytes.Equal(got.Bytes(), tc.src) {
				t.Errorf("%d messages (%d first), %d bytes; want %d messages, the source's %d bytes", msgs, firsts, got.Len(), tc.msgs, len(tc.src))
			}
		})
	}
}

// TestByteRange: negative offsets and lengths are INVALID_ARGUMENT.
func TestByteRange(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		off, n int64
		ok     bool
	}{{0, 0, true}, {5, 0, true}, {0, 5, true}, {-1, 0, false}, {0, -1, false}} {
		err := byteRange(tc.off, tc.n)
		if (err == nil) != tc.ok || (err != nil && (!errors.Is(err, errdefs.ErrInvalidArgument) || errdefs.Code(err) != "invalid_range")) {
			t.Errorf("byteRange(%d, %d) = %v", tc.off, tc.n, err)
		}
	}
}
