package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"genesis.dev/sandbox/client"
)

// rfbClient is the least RFB 3.8 client: the handshake, key and pointer
// events, and a reader that discards what the server sends.
type rfbClient struct {
	conn          net.Conn
	width, height int
	got           chan byte // the type of the first server message
}

func dialRFB(t *testing.T, c *client.Client, id, role string) *rfbClient {
	t.Helper()
	conn, err := c.DialDisplayVNC(callCtx(t), id, role)
	if err != nil {
		t.Fatalf("live view as %s: %v", role, err)
	}
	return handshakeRFB(t, conn, role)
}

// dialRFBURL opens a live-view link with no API key.
func dialRFBURL(t *testing.T, u string) *rfbClient {
	t.Helper()
	ws, _, err := websocket.Dial(callCtx(t), u, &websocket.DialOptions{Subprotocols: []string{"binary"}})
	if err != nil {
		t.Fatalf("live-view link: %v", err)
	}
	ws.SetReadLimit(-1)
	return handshakeRFB(t, websocket.NetConn(context.Background(), ws, websocket.MessageBinary), "link")
}

func handshakeRFB(t *testing.T, conn net.Conn, role string) *rfbClient {
	t.Helper()
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	read := func(n int) []byte {
		b := make([]byte, n)
		if _, err := io.ReadFull(conn, b); err != nil {
			t.Fatalf("rfb handshake (%s): %v", role, err)
		}
		return b
	}
	if v := string(read(12)); !strings.HasPrefix(v, "RFB 003.") {
		t.Fatalf("server version %q", v)
	}
	conn.Write([]byte("RFB 003.008\n"))
	n := int(read(1)[0])
	types := read(n)
	if !strings.Contains(string(types), "\x01") {
		t.Fatalf("security types %v lack None", types)
	}
	conn.Write([]byte{1})
	if r := binary.BigEndian.Uint32(read(4)); r != 0 {
		t.Fatalf("security result %d", r)
	}
	conn.Write([]byte{0}) // not shared: the service makes it shared
	init := read(24)
	read(int(binary.BigEndian.Uint32(init[20:])))
	_ = conn.SetDeadline(time.Time{})
	rc := &rfbClient{conn: conn, width: int(binary.BigEndian.Uint16(init[0:])), height: int(binary.BigEndian.Uint16(init[2:])), got: make(chan byte, 1)}
	go func() {
		b := make([]byte, 64<<10)
		first := true
		for {
			n, err := conn.Read(b)
			if n > 0 && first {
				rc.got <- b[0]
				first = false
			}
			if err != nil {
				return
			}
		}
	}()
	return rc
}

// typeText sends key down and up events of text's characters (ASCII;
// '\n' is Return).
func (r *rfbClient) typeText(text string) {
	for _, ch := range text {
		ks := uint32(ch)
		if ch == '\n' {
			ks = 0xff0d
		}
		for _, down := range []byte{1, 0} {
			m := []byte{4, down, 0, 0, 0, 0, 0, 0}
			binary.BigEndian.PutUint32(m[4:], ks)
			r.conn.Write(m)
		}
	}
}

// TestDesktopLiveView drives the live view (RFB over the service's
// WebSocket) under each runtime: both roles see the 1280×800 desktop; an
// observer's typing changes nothing in the sandbox, a controller's does;
// a second controller takes the pen and the first one's input is dropped
// from then on.
func TestDesktopLiveView(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	e.requireImage(t, "desktop-vnc")
	svc := e.start(t)
	c := svc.client()
	for _, rt := range e.runtimes(t) {
		t.Run(rt, func(t *testing.T) {
			sb := createDesktop(t, c, rt)
			res, err := c.ComputerActions(callCtx(t), sb.ID, client.ComputerActionsRequest{Actions: []client.ComputerAction{
				{Action: "launch", Command: []string{"xterm", "-fa", "DejaVu Sans Mono", "-fs", "12", "-geometry", "80x20+0+0"}}}})
			if err != nil || !res.OK {
				t.Fatalf("launch: %+v %v", res, err)
			}
			var win client.ComputerWindow
			eventually(t, 30*time.Second, "the xterm window", func() (bool, string) {
				res, err := c.ComputerActions(callCtx(t), sb.ID, client.ComputerActionsRequest{Actions: []client.ComputerAction{{Action: "list_windows"}}})
				if err != nil || len(res.Results[0].Windows) == 0 {
					return false, fmt.Sprint(res, err)
				}
				win = res.Results[0].Windows[0]
				return true, ""
			})
			// The xterm's shell is up before anything is typed (the image has no
			// procps: read /proc).
			if r := execOK(t, c, sb.ID, "for i in $(seq 100); do cat /proc/[0-9]*/comm 2>/dev/null | grep -qx bash && exit 0; sleep 0.1; done; exit 1"); r.ExitCode != 0 {
				t.Fatalf("the xterm's shell did not start: %+v", r)
			}
			if res, err := c.ComputerActions(callCtx(t), sb.ID, client.ComputerActionsRequest{Actions: []client.ComputerAction{
				{Action: "left_click", Coordinate: []int{win.X + win.Width/2, win.Y + win.Height/2}}}}); err != nil || !res.OK {
				t.Fatalf("focus the xterm: %+v %v", res, err)
			}

			// The raw X and VNC ports are not reachable through the generic
			// port proxy (it would bypass the roles).
			for _, port := range []int{5901, 6001} {
				if _, err := c.DialPort(callCtx(t), sb.ID, port); client.ErrorCode(err) != "port_not_allowed" {
					t.Errorf("port %d through the port proxy: %v, want port_not_allowed", port, err)
				}
			}
			if code, body := apiJSON(t, svc, "GET", "/v1/sandboxes/"+sb.ID+"/display/vnc?role=admin", nil, nil); code != 400 || !strings.Contains(body, "invalid_role") {
				t.Errorf("role admin: %d %s", code, body)
			}
			obs := dialRFB(t, c, sb.ID, "observer")
			ctl := dialRFB(t, c, sb.ID, "controller")
			if obs.width != 1280 || obs.height != 800 {
				t.Fatalf("server init %dx%d", obs.width, obs.height)
			}
			// A full update request: the desktop is sent (type 0).
			for _, r := range []*rfbClient{obs, ctl} {
				r.conn.Write([]byte{3, 0, 0, 0, 0, 0, 0x05, 0x00, 0x03, 0x20})
				select {
				case typ := <-r.got:
					if typ != 0 {
						t.Errorf("first server message type %d, want a FramebufferUpdate", typ)
					}
				case <-time.After(20 * time.Second):
					t.Fatal("no framebuffer update")
				}
			}
			// The observer types and clicks; then the controller types. The
			// X server handles them in order, so once the controller's
			// file exists the observer's would too, had it been let through.
			obs.typeText("touch /workspace/observer\n")
			obs.conn.Write([]byte{5, 1, 0, 10, 0, 10})
			obs.conn.Write([]byte{5, 0, 0, 10, 0, 10})
			ctl.typeText("touch /workspace/controller\n")
			eventually(t, 20*time.Second, "the controller's command", func() (bool, string) {
				r, err := c.Exec(callCtx(t), sb.ID, client.ExecRequest{Script: "ls /workspace"})
				return err == nil && strings.Contains(r.Stdout, "controller"), fmt.Sprint(r, err)
			})
			// A second controller takes the pen; the first is now an
			// observer.
			ctl2 := dialRFB(t, c, sb.ID, "controller")
			ctl.typeText("touch /workspace/demoted\n")
			ctl2.typeText("touch /workspace/taken\n")
			eventually(t, 20*time.Second, "the new controller's command", func() (bool, string) {
				r, err := c.Exec(callCtx(t), sb.ID, client.ExecRequest{Script: "ls /workspace"})
				return err == nil && strings.Contains(r.Stdout, "taken"), fmt.Sprint(r, err)
			})
			if r := execOK(t, c, sb.ID, "ls /workspace"); strings.Contains(r.Stdout, "observer") || strings.Contains(r.Stdout, "demoted") {
				t.Errorf("an observer's input reached the desktop: %q", r.Stdout)
			}
			// A live-view link opens the view without the API key, as its
			// role; a tampered or expired one is a 404 and changes nothing.
			link, err := c.CreateDisplayLink(callCtx(t), sb.ID, "observer", time.Minute)
			if err != nil || !strings.Contains(link.VNCURL, "/v1/displays/") || strings.Contains(link.VNCURL, svc.e.apiKey) {
				t.Fatalf("display link: %+v %v", link, err)
			}
			viaLink := dialRFBURL(t, link.VNCURL)
			viaLink.typeText("touch /workspace/linked\n")
			ctl2.typeText("touch /workspace/after-link\n")
			eventually(t, 20*time.Second, "the controller's command after the link's", func() (bool, string) {
				r, err := c.Exec(callCtx(t), sb.ID, client.ExecRequest{Script: "ls /workspace"})
				return err == nil && strings.Contains(r.Stdout, "after-link"), fmt.Sprint(r, err)
			})
			if r := execOK(t, c, sb.ID, "ls /workspace"); strings.Contains(r.Stdout, "linked") {
				t.Errorf("an observer link's input reached the desktop: %q", r.Stdout)
			}
			tampered := strings.Replace(link.VNCURL, "/v1/displays/v2.", "/v1/displays/v2.A", 1)
			if code, body := apiJSONAs(t, svc, "", "GET", strings.TrimPrefix(strings.Replace(tampered, "ws://", "http://", 1), svc.url()), nil, nil); code != 404 || !strings.Contains(body, "link_invalid") {
				t.Errorf("tampered link: %d %s", code, body)
			}
			short, err := c.CreateDisplayLink(callCtx(t), sb.ID, "controller", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			path := strings.TrimPrefix(strings.Replace(short.VNCURL, "ws://", "http://", 1), svc.url())
			eventually(t, 10*time.Second, "the 1 s link expired", func() (bool, string) {
				code, body := apiJSONAs(t, svc, "", "GET", path, nil, nil)
				return code == 404 && strings.Contains(body, "link_expired"), body
			})
			if code, body := apiJSON(t, svc, "POST", "/v1/sandboxes/"+sb.ID+"/display/links", map[string]any{"role": "admin", "ttl_seconds": 60}, nil); code != 400 || !strings.Contains(body, "invalid_role") {
				t.Errorf("link role admin: %d %s", code, body)
			}

			// A client breaking the protocol is disconnected.
			obs.conn.Write([]byte{99})
			_ = obs.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.Copy(io.Discard, obs.conn); err != nil && strings.Contains(err.Error(), "timeout") {
				t.Errorf("a client sending message type 99 stayed connected")
			}
		})
	}
}
