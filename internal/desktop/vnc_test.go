package desktop

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

// handshake is a client's RFB 3.8 handshake with the None type, not shared.
var handshake = []byte("RFB 003.008\n\x01\x00")

// TestFilterRFB: the handshake goes through with the shared flag forced
// on, non-input messages go to the server, input messages to input only,
// and a message the proxy does not know ends the session.
func TestFilterRFB(t *testing.T) {
	t.Parallel()
	msgs := [][]byte{
		{3, 0, 0, 0, 0, 0, 5, 0, 3, 32},                  // FramebufferUpdateRequest
		{2, 0, 0, 2, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x21}, // SetEncodings ×2
		{4, 1, 0, 0, 0, 0, 0, 'a'},                       // KeyEvent
		{5, 1, 0, 10, 0, 10},                             // PointerEvent
		{6, 0, 0, 0, 0, 0, 0, 2, 'h', 'i'},               // ClientCutText
		{251, 0, 0, 64, 0, 64, 0, 0},                     // SetDesktopSize, no screens
		{255, 0, 0, 1, 0, 0, 0, 'a', 0, 0, 0, 30},        // QEMU extended key
		{248, 0, 0, 0, 0, 0, 0, 1, 2, 'x', 'y'},          // ClientFence
	}
	in := append([]byte{}, handshake...)
	for _, m := range msgs {
		in = append(in, m...)
	}
	var server bytes.Buffer
	var inputs [][]byte
	err := filterRFB(bufio.NewReader(bytes.NewReader(in)), &server, func(m []byte) error {
		inputs = append(inputs, m)
		return nil
	})
	if !errors.Is(err, io.EOF) {
		t.Fatalf("filterRFB: %v", err)
	}
	want := append([]byte("RFB 003.008\n\x01\x01"), msgs[0]...)
	want = append(want, msgs[1]...)
	want = append(want, msgs[7]...)
	if !bytes.Equal(server.Bytes(), want) {
		t.Errorf("server got % x\nwant % x", server.Bytes(), want)
	}
	if len(inputs) != 5 {
		t.Errorf("%d input messages, want 5 (key, pointer, cut text, desktop size, QEMU key)", len(inputs))
	}
	for _, bad := range [][]byte{
		[]byte("RFB 003.003\n"),
		[]byte("RFB 003.008\n\x02"),
		append(append([]byte{}, handshake...), 99),
		append(append([]byte{}, handshake...), 6, 0, 0, 0, 0x7f, 0, 0, 0),
		append(append([]byte{}, handshake...), 2, 0, 0xff, 0xff),
		append(append([]byte{}, handshake...), 255, 1, 0, 0),
	} {
		err := filterRFB(bufio.NewReader(bytes.NewReader(bad)), io.Discard, func([]byte) error { return nil })
		if !errors.Is(err, errRFB) {
			t.Errorf("% x: %v, want an RFB protocol error", bad, err)
		}
	}
}

// FuzzFilterRFB: whatever a client sends, the proxy never forwards an
// input message to the server and never panics.
func FuzzFilterRFB(f *testing.F) {
	f.Add([]byte{4, 1, 0, 0, 0, 0, 0, 'a'})
	f.Add([]byte{3, 0, 0, 0, 0, 0, 5, 0, 3, 32, 5, 1, 0, 10, 0, 10})
	f.Add([]byte{6, 0, 0, 0, 0xff, 0xff, 0xff, 0xfe, 'x', 'y'})
	f.Fuzz(func(t *testing.T, b []byte) {
		var server bytes.Buffer
		in := append(append([]byte{}, handshake...), b...)
		_ = filterRFB(bufio.NewReader(bytes.NewReader(in)), &server, func([]byte) error { return nil })
		// Re-parse what reached the server: no input message among it.
		r := bufio.NewReader(bytes.NewReader(server.Bytes()[14:]))
		for {
			_, isInput, err := readClientMessage(r)
			if err != nil {
				break
			}
			if isInput {
				t.Fatalf("an input message reached the server from % x", b)
			}
		}
	})
}

// TestDropEncodings checks that the extended mouse buttons pseudo-encoding
// (7-byte pointer events the proxy does not parse) never reaches the
// server, and the others keep their order.
func TestDropEncodings(t *testing.T) {
	msg := []byte{2, 0, 0, 3, 0, 0, 0, 7, 0xff, 0xff, 0xfe, 0xc4, 0xff, 0xff, 0xff, 0x21}
	got := dropEncodings(msg)
	want := []byte{2, 0, 0, 2, 0, 0, 0, 7, 0xff, 0xff, 0xff, 0x21}
	if string(got) != string(want) {
		t.Fatalf("got % x, want % x", got, want)
	}
}
