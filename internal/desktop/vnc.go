package desktop

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"genesis.dev/sandbox/internal/interactive"
	"genesis.dev/sandbox/internal/trace"
)

// Roles of a live-view connection.
const (
	RoleObserver   = "observer"
	RoleController = "controller"
)

// Bounds of the client messages the proxy parses.
const (
	maxEncodings   = 1024
	maxCutText     = 1 << 20
	maxScreens     = 16
	maxFenceLength = 64
)

// errRFB is a client that breaks the RFB protocol; its connection closes.
var errRFB = errors.New("rfb")

// VNCSession is one live-view connection to a sandbox's VNC server, not
// yet joined to its client.
type VNCSession struct {
	SandboxID string
	Role      string
	// Who names the person at a controller's viewer: their input makes
	// them the control lease's holder "human:<who>".
	Who    string
	server net.Conn
	hub    *interactive.Conn // the controllers' pen; nil for an observer
	m      *Manager
	tenant string
	log    *inputLog // the human's input for the trace; nil when not traced
}

// DefaultViewer is the Who of a live-view connection that names nobody.
const DefaultViewer = "viewer"

// OpenVNC dials the VNC server of a desktop sandbox (waiting up to
// ReadyWait for it) for a client of role: an observer's input is dropped
// by the proxy; a controller takes the pen from any other controller
// (the terminals' takeover semantics: the previous one is demoted to
// observing).
func (m *Manager) OpenVNC(ctx context.Context, tenant, id, role string) (*VNCSession, error) {
	return m.OpenVNCAs(ctx, tenant, id, role, DefaultViewer)
}

// OpenVNCAs is OpenVNC for a person named who (a controller's input makes
// "human:<who>" the control lease's holder when no human holds it).
func (m *Manager) OpenVNCAs(ctx context.Context, tenant, id, role, who string) (*VNCSession, error) {
	if role != RoleObserver && role != RoleController {
		return nil, bad("invalid_role", "role %.40q must be observer or controller", role)
	}
	if who == "" {
		who = DefaultViewer
	}
	if err := validHolder(holderHumanPfx + who); err != nil {
		return nil, err
	}
	t, err := m.cfg.Sandboxes.AttachDesktop(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	defer t.Release()
	c, err := m.dialReady(ctx, t, t.Spec.VNCPort(), "VNC server")
	if err != nil {
		return nil, err
	}
	v := &VNCSession{SandboxID: t.SandboxID, Role: role, Who: who, server: c, m: m, tenant: t.Tenant}
	if role == RoleController {
		v.hub = m.hub.Join(t.SandboxID, c, true)
		if m.cfg.Trace != nil {
			actor := holderHumanPfx + who
			v.log = newInputLog(func(d map[string]any) {
				recordTo(context.Background(), m.cfg.Trace, v.tenant, v.SandboxID, actor, trace.KindHumanInput, d)
			})
		}
	}
	return v, nil
}

// Close ends a session that was never served.
func (v *VNCSession) Close() {
	if v.hub != nil {
		v.hub.Leave()
	}
	v.server.Close()
}

// Serve carries RFB between client and the sandbox's VNC server until
// either ends: the server's bytes as they come, the client's parsed
// message by message, an input message (key, pointer, cut text, desktop
// size, QEMU key) only while this connection holds the pen. A client that
// breaks the protocol is disconnected.
func (v *VNCSession) Serve(ctx context.Context, client net.Conn) error {
	defer v.server.Close()
	defer client.Close()
	if v.hub != nil {
		defer v.hub.Leave()
		defer v.m.leaveView(v)
	}
	if v.log != nil {
		defer v.log.finish()
	}
	var once sync.Once
	done := make(chan struct{})
	stop := func() { once.Do(func() { close(done); v.server.Close(); client.Close() }) }
	go func() {
		// Bounded: one buffer; a client that never reads stalls only its own
		// copy (and the server's queue for it), never the service.
		_, _ = io.Copy(client, v.server)
		stop()
	}()
	go func() {
		select {
		case <-ctx.Done():
			stop()
		case <-done:
		}
	}()
	err := filterRFB(bufio.NewReaderSize(client, 64<<10), v.server, v.input)
	stop()
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// input forwards an input message if the connection holds the pen; the
// person then holds the control lease (the agent's input is refused) and
// the message goes into the trace's coalesced human input.
func (v *VNCSession) input(msg []byte) error {
	if v.hub == nil || msg[0] == 250 { // xvp (shutdown, reboot) is never forwarded
		return nil
	}
	if !v.hub.Writer() {
		return nil
	}
	v.m.joinView(v)
	ok, err := v.hub.Input(msg)
	if ok && v.log != nil {
		v.log.message(msg)
	}
	return err
}

// filterRFB reads the client's side of an RFB 3.7/3.8 session with the
// None security type: the handshake is forwarded (the shared flag forced
// on, so that no viewer disconnects the others), then each client message
// goes to server, except input messages, which go to input.
func filterRFB(r *bufio.Reader, server io.Writer, input func([]byte) error) error {
	version := make([]byte, 12)
	if _, err := io.ReadFull(r, version); err != nil {
		return err
	}
	if v := string(version); v != "RFB 003.008\n" && v != "RFB 003.007\n" {
		return fmt.Errorf("%w: client version %q (want 3.7 or 3.8)", errRFB, v)
	}
	// Each handshake step goes on at once: the server answers it before
	// the client sends the next.
	if _, err := server.Write(version); err != nil {
		return err
	}
	sec := make([]byte, 1)
	if _, err := io.ReadFull(r, sec); err != nil {
		return err
	}
	if sec[0] != 1 {
		return fmt.Errorf("%w: security type %d (the server offers None only)", errRFB, sec[0])
	}
	if _, err := server.Write(sec); err != nil {
		return err
	}
	shared := make([]byte, 1)
	if _, err := io.ReadFull(r, shared); err != nil {
		return err
	}
	shared[0] = 1
	if _, err := server.Write(shared); err != nil {
		return err
	}
	for {
		msg, isInput, err := readClientMessage(r)
		if err != nil {
			return err
		}
		if isInput {
			err = input(msg)
		} else {
			if msg[0] == 2 {
				msg = dropEncodings(msg)
			}
			_, err = server.Write(msg)
		}
		if err != nil {
			return err
		}
	}
}

// readClientMessage reads one RFB client-to-server message whole.
func readClientMessage(r *bufio.Reader) ([]byte, bool, error) {
	typ, err := r.Peek(1)
	if err != nil {
		return nil, false, err
	}
	fixed := func(n int, input bool) ([]byte, bool, error) {
		b := make([]byte, n)
		_, err := io.ReadFull(r, b)
		return b, input, err
	}
	// head reads n bytes, then the variable part whose length f computes.
	head := func(n int, input bool, f func(h []byte) (int, error)) ([]byte, bool, error) {
		h := make([]byte, n)
		if _, err := io.ReadFull(r, h); err != nil {
			return nil, false, err
		}
		more, err := f(h)
		if err != nil {
			return nil, false, err
		}
		b := make([]byte, n+more)
		copy(b, h)
		_, err = io.ReadFull(r, b[n:])
		return b, input, err
	}
	switch typ[0] {
	case 0: // SetPixelFormat
		return fixed(20, false)
	case 2: // SetEncodings
		return head(4, false, func(h []byte) (int, error) {
			n := int(binary.BigEndian.Uint16(h[2:]))
			if n > maxEncodings {
				return 0, fmt.Errorf("%w: %d encodings", errRFB, n)
			}
			return 4 * n, nil
		})
	case 3: // FramebufferUpdateRequest
		return fixed(10, false)
	case 4: // KeyEvent
		return fixed(8, true)
	case 5: // PointerEvent
		return fixed(6, true)
	case 6: // ClientCutText (a negative length is the extended clipboard's)
		return head(8, true, func(h []byte) (int, error) {
			n := int64(int32(binary.BigEndian.Uint32(h[4:])))
			if n < 0 {
				n = -n
			}
			if n > maxCutText {
				return 0, fmt.Errorf("%w: %d bytes of cut text", errRFB, n)
			}
			return int(n), nil
		})
	case 150: // EnableContinuousUpdates
		return fixed(10, false)
	case 248: // ClientFence
		return head(9, false, func(h []byte) (int, error) {
			if n := int(h[8]); n <= maxFenceLength {
				return n, nil
			}
			return 0, fmt.Errorf("%w: fence of %d bytes", errRFB, h[8])
		})
	case 250: // xvp (shutdown, reboot): never forwarded
		return fixed(4, true)
	case 251: // SetDesktopSize
		return head(8, true, func(h []byte) (int, error) {
			n := int(h[6])
			if n > maxScreens {
				return 0, fmt.Errorf("%w: %d screens", errRFB, n)
			}
			return 16 * n, nil
		})
	case 255: // QEMU: only the extended key event
		b, err := r.Peek(2)
		if err != nil {
			return nil, false, err
		}
		if b[1] != 0 {
			return nil, false, fmt.Errorf("%w: QEMU message %d", errRFB, b[1])
		}
		return fixed(12, true)
	}
	return nil, false, fmt.Errorf("%w: client message type %d", errRFB, typ[0])
}

// encExtendedMouseButtons is the pseudo-encoding that lets a client send
// 7-byte PointerEvents (a marker bit in the mask); the proxy parses 6-byte
// ones only, so it never lets the server agree to it.
const encExtendedMouseButtons = -316

// dropEncodings removes from a SetEncodings message the encodings that
// would change the client's messages in ways the proxy does not parse.
func dropEncodings(msg []byte) []byte {
	out := append([]byte(nil), msg[:4]...)
	n := 0
	for o := 4; o+4 <= len(msg); o += 4 {
		if int32(binary.BigEndian.Uint32(msg[o:])) == encExtendedMouseButtons {
			continue
		}
		out = append(out, msg[o:o+4]...)
		n++
	}
	binary.BigEndian.PutUint16(out[2:], uint16(n))
	return out
}
