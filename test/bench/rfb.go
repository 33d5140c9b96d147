package bench

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"
)

// rfbCounter is the least RFB 3.8 viewer that counts what it receives: it
// asks for raw encoding only and for the next incremental update as soon
// as one has arrived.
type rfbCounter struct {
	conn          net.Conn
	r             *bufio.Reader
	width, height int
	bpp           int
	frames, bytes int64
}

func newRFBCounter(conn net.Conn) (*rfbCounter, error) {
	v := &rfbCounter{conn: conn, r: bufio.NewReaderSize(conn, 1<<20)}
	buf := make([]byte, 24)
	if _, err := io.ReadFull(v.r, buf[:12]); err != nil {
		return nil, err
	}
	if _, err := conn.Write([]byte("RFB 003.008\n")); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(v.r, buf[:1]); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(v.r, make([]byte, buf[0])); err != nil {
		return nil, err
	}
	if _, err := conn.Write([]byte{1}); err != nil { // None
		return nil, err
	}
	if _, err := io.ReadFull(v.r, buf[:4]); err != nil || binary.BigEndian.Uint32(buf) != 0 {
		return nil, fmt.Errorf("rfb security result: %v", err)
	}
	if _, err := conn.Write([]byte{1}); err != nil { // shared
		return nil, err
	}
	if _, err := io.ReadFull(v.r, buf[:24]); err != nil {
		return nil, err
	}
	v.width, v.height, v.bpp = int(binary.BigEndian.Uint16(buf)), int(binary.BigEndian.Uint16(buf[2:])), int(buf[4])
	if _, err := io.CopyN(io.Discard, v.r, int64(binary.BigEndian.Uint32(buf[20:]))); err != nil {
		return nil, err
	}
	// SetEncodings: raw only; then a full update.
	if _, err := conn.Write([]byte{2, 0, 0, 1, 0, 0, 0, 0}); err != nil {
		return nil, err
	}
	return v, v.request(false)
}

func (v *rfbCounter) request(incremental bool) error {
	m := []byte{3, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if incremental {
		m[1] = 1
	}
	binary.BigEndian.PutUint16(m[6:], uint16(v.width))
	binary.BigEndian.PutUint16(m[8:], uint16(v.height))
	_, err := v.conn.Write(m)
	return err
}

// count reads server messages for d, counting framebuffer updates and
// their bytes.
func (v *rfbCounter) count(d time.Duration) error {
	v.frames, v.bytes = 0, 0
	end := time.Now().Add(d)
	hdr := make([]byte, 12)
	// No read deadline: a WebSocket's net.Conn closes when one passes. The
	// screen changes all the time, so messages keep coming.
	for time.Now().Before(end) {
		typ, err := v.r.ReadByte()
		if err != nil {
			return err
		}
		switch typ {
		case 0: // FramebufferUpdate
			if _, err := io.ReadFull(v.r, hdr[:3]); err != nil {
				return err
			}
			n := int(binary.BigEndian.Uint16(hdr[1:]))
			size := int64(4)
			for range n {
				if _, err := io.ReadFull(v.r, hdr); err != nil {
					return err
				}
				w, h, enc := int64(binary.BigEndian.Uint16(hdr[4:])), int64(binary.BigEndian.Uint16(hdr[6:])), int32(binary.BigEndian.Uint32(hdr[8:]))
				if enc != 0 {
					return fmt.Errorf("rfb: rectangle encoding %d, asked for raw only", enc)
				}
				px := w * h * int64(v.bpp/8)
				if _, err := io.CopyN(io.Discard, v.r, px); err != nil {
					return err
				}
				size += 12 + px
			}
			v.frames++
			v.bytes += size
			if err := v.request(true); err != nil {
				return err
			}
		case 2: // Bell
		case 3: // ServerCutText
			if _, err := io.ReadFull(v.r, hdr[:7]); err != nil {
				return err
			}
			if _, err := io.CopyN(io.Discard, v.r, int64(binary.BigEndian.Uint32(hdr[3:]))); err != nil {
				return err
			}
		default:
			return fmt.Errorf("rfb: server message type %d", typ)
		}
	}
	return nil
}
