package gateway

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"
)

func peekFrom(t *testing.T, write func(net.Conn)) (string, []byte) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go write(a)
	b.SetDeadline(time.Now().Add(5 * time.Second))
	rec := &recorder{Conn: b}
	return peekSNI(rec), rec.buf.Bytes()
}

func TestPeekSNI(t *testing.T) {
	t.Parallel()
	name, raw := peekFrom(t, func(c net.Conn) {
		tls.Client(c, &tls.Config{ServerName: "Web.Test"}).Handshake()
	})
	if name != "Web.Test" || len(raw) < 5 || raw[0] != 0x16 {
		t.Fatalf("peekSNI = %q with %d bytes recorded", name, len(raw))
	}
	name, _ = peekFrom(t, func(c net.Conn) { io.WriteString(c, "GET / HTTP/1.1\r\nHost: web.test\r\n\r\n"); c.Close() })
	if name != "" {
		t.Fatalf("plain HTTP gave server name %q", name)
	}
	name, _ = peekFrom(t, func(c net.Conn) {
		tls.Client(c, &tls.Config{InsecureSkipVerify: true}).Handshake() // no SNI
	})
	if name != "" {
		t.Fatalf("ClientHello without SNI gave %q", name)
	}
}
