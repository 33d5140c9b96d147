package docker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"genesis.dev/sandbox/internal/errdefs"
)

// Stream ids in the multiplexed log stream of a container without a TTY.
const (
	streamStdin  = 0
	streamStdout = 1
	streamStderr = 2
	streamSystem = 3
)

// demux splits Docker's multiplexed stream (8-byte frame headers: stream id,
// three zero bytes, big-endian uint32 payload length) into stdout and
// stderr. The input is container output and thus untrusted: frames are
// copied, never buffered whole.
func demux(r io.Reader, stdout, stderr io.Writer) error {
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if err == io.EOF {
				return nil
			}
			return fmt.Errorf("read frame header: %v: %w", err, errdefs.ErrUnavailable)
		}
		size := int64(binary.BigEndian.Uint32(hdr[4:]))
		var w io.Writer
		switch hdr[0] {
		case streamStdin, streamStdout:
			w = stdout
		case streamStderr:
			w = stderr
		case streamSystem:
			w = io.Discard
		default:
			return fmt.Errorf("bad frame: stream id %d: %w", hdr[0], errdefs.ErrInternal)
		}
		n, err := io.CopyN(w, r, size)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("frame truncated after %d of %d bytes: %w", n, size, errdefs.ErrUnavailable)
			}
			return fmt.Errorf("copy frame: %v: %w", err, errdefs.ErrUnavailable)
		}
	}
}

// limitedBuffer keeps the first max bytes written and drops the rest.
type limitedBuffer struct {
	buf []byte
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - len(b.buf); room > 0 {
		b.buf = append(b.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}
