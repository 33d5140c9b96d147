package desktop

import (
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"io"
	"log"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"

	"genesis.dev/sandbox/api"
)

// X event types XTEST's FakeInput takes.
const (
	xKeyPress      = 2
	xKeyRelease    = 3
	xButtonPress   = 4
	xButtonRelease = 5
	xMotionNotify  = 6
)

// noAuthConn rewrites the X connection setup request (the first write) to
// carry no authorisation: the X client library would otherwise send a
// cookie from the service host's own Xauthority file to the sandbox's X
// server. The sandbox's server runs without access control (-ac); it is
// reached only through the agent's port dial.
type noAuthConn struct {
	net.Conn
	once sync.Once
}

func (c *noAuthConn) Write(p []byte) (int, error) {
	first := false
	c.once.Do(func() { first = true })
	if !first {
		return c.Conn.Write(p)
	}
	// The setup request: byte order, pad, major, minor, name length, data
	// length, pad, then name and data (each padded to 4).
	if len(p) < 12 {
		return 0, errors.New("x11: short connection setup")
	}
	setup := make([]byte, 12)
	copy(setup, p[:6])
	// Name and data lengths (and the trailing pad) stay zero.
	if _, err := c.Conn.Write(setup); err != nil {
		return 0, err
	}
	return len(p), nil
}

// display is one X connection to a sandbox's display. Its methods are not
// safe for concurrent use; the session's lock serialises them.
type display struct {
	conn          *xgb.Conn
	root          xproto.Window
	width, height int
	minKey        xproto.Keycode
	maxKey        xproto.Keycode
	perCode       int
	keymap        []xproto.Keysym // (code-minKey)*perCode + column
	// scratch are keycodes with no keysym, remapped to type characters
	// the keymap lacks; next is the one to use next.
	scratch []xproto.Keycode
	next    int
	atoms   map[string]xproto.Atom
	// wmChecked is set once a launch has waited for the window manager
	// (waitWM): later launches do not wait again.
	wmChecked bool
}

// xgb logs to stderr by itself (a missing ~/.Xauthority, a connection
// closed when its sandbox ends); the errors reach the desktop routes as
// errors, so its log is dropped.
func init() { xgb.Logger = log.New(io.Discard, "", 0) }

// openDisplay speaks X over c (the agent's dial to the X server's port).
func openDisplay(c net.Conn) (*display, error) {
	conn, err := xgb.NewConnNet(&noAuthConn{Conn: c})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("x11 connection setup: %w", err)
	}
	d := &display{conn: conn, atoms: map[string]xproto.Atom{}}
	if err := d.init(); err != nil {
		conn.Close()
		return nil, err
	}
	return d, nil
}

func (d *display) init() error {
	setup := xproto.Setup(d.conn)
	if setup == nil || len(setup.Roots) == 0 {
		return errors.New("x11: the server has no screen")
	}
	scr := setup.DefaultScreen(d.conn)
	d.root = scr.Root
	d.width, d.height = int(scr.WidthInPixels), int(scr.HeightInPixels)
	if scr.RootDepth != 24 {
		return fmt.Errorf("x11: root depth %d, want 24", scr.RootDepth)
	}
	if err := xtest.Init(d.conn); err != nil {
		return fmt.Errorf("x11: the server lacks XTEST: %w", err)
	}
	d.minKey, d.maxKey = setup.MinKeycode, setup.MaxKeycode
	return d.loadKeymap()
}

func (d *display) loadKeymap() error {
	count := byte(int(d.maxKey) - int(d.minKey) + 1)
	km, err := xproto.GetKeyboardMapping(d.conn, d.minKey, count).Reply()
	if err != nil {
		return fmt.Errorf("x11: keyboard mapping: %w", err)
	}
	d.perCode = int(km.KeysymsPerKeycode)
	d.keymap = km.Keysyms
	d.scratch = d.scratch[:0]
	for code := int(d.minKey); code <= int(d.maxKey); code++ {
		empty := true
		for col := range d.perCode {
			if d.keymap[(code-int(d.minKey))*d.perCode+col] != 0 {
				empty = false
				break
			}
		}
		if empty {
			d.scratch = append(d.scratch, xproto.Keycode(code))
		}
	}
	return nil
}

func (d *display) close() { d.conn.Close() }

// sync waits until the server has handled every request sent so far.
func (d *display) sync() error {
	_, err := xproto.GetInputFocus(d.conn).Reply()
	return err
}

func (d *display) fake(typ, detail byte, x, y int) {
	xtest.FakeInput(d.conn, typ, detail, 0, d.root, int16(x), int16(y), 0)
}

// move puts the pointer at real coordinates (x, y).
func (d *display) move(x, y int) { d.fake(xMotionNotify, 0, x, y) }

// button presses (down) or releases a pointer button.
func (d *display) button(b byte, down bool) {
	if down {
		d.fake(xButtonPress, b, 0, 0)
	} else {
		d.fake(xButtonRelease, b, 0, 0)
	}
}

// keyFor finds the keycode typing ks and whether Shift is needed; a
// keysym the keymap lacks is mapped onto a scratch keycode.
func (d *display) keyFor(ks keysym) (xproto.Keycode, bool, error) {
	for i, s := range d.keymap {
		if keysym(s) != ks {
			continue
		}
		col := i % d.perCode
		if col > 1 {
			continue
		}
		return xproto.Keycode(int(d.minKey) + i/d.perCode), col == 1, nil
	}
	if len(d.scratch) == 0 {
		return 0, false, fmt.Errorf("x11: no free keycode to type keysym %#x", uint32(ks))
	}
	code := d.scratch[d.next%len(d.scratch)]
	d.next++
	syms := make([]xproto.Keysym, d.perCode)
	syms[0], syms[1] = xproto.Keysym(ks), xproto.Keysym(ks)
	if err := xproto.ChangeKeyboardMappingChecked(d.conn, 1, code, byte(d.perCode), syms).Check(); err != nil {
		return 0, false, fmt.Errorf("x11: remap keycode %d: %w", code, err)
	}
	base := (int(code) - int(d.minKey)) * d.perCode
	// Forget the keysym the scratch code typed before, so that a later
	// lookup does not find a stale mapping.
	for col := range d.perCode {
		d.keymap[base+col] = syms[col]
	}
	return code, false, nil
}

// shiftCode is the keycode of Shift_L.
func (d *display) shiftCode() (xproto.Keycode, error) {
	c, _, err := d.keyFor(0xffe1)
	return c, err
}

// key presses (down) or releases the key typing ks, with Shift around it
// when ks is on the shifted level and not itself a modifier.
func (d *display) key(ks keysym, down bool) error {
	code, shifted, err := d.keyFor(ks)
	if err != nil {
		return err
	}
	var shift xproto.Keycode
	if shifted {
		if shift, err = d.shiftCode(); err != nil {
			return err
		}
	}
	if down {
		if shifted {
			d.fake(xKeyPress, byte(shift), 0, 0)
		}
		d.fake(xKeyPress, byte(code), 0, 0)
	} else {
		d.fake(xKeyRelease, byte(code), 0, 0)
		if shifted {
			d.fake(xKeyRelease, byte(shift), 0, 0)
		}
	}
	return nil
}

// chord presses the keys in order and releases them in reverse.
func (d *display) chord(keys []keysym, hold time.Duration) error {
	for _, k := range keys {
		if err := d.key(k, true); err != nil {
			return err
		}
	}
	if hold > 0 {
		if err := d.sync(); err != nil {
			return err
		}
		time.Sleep(hold)
	}
	for i := len(keys) - 1; i >= 0; i-- {
		if err := d.key(keys[i], false); err != nil {
			return err
		}
	}
	return d.sync()
}

// pointer reads the pointer's real position.
func (d *display) pointer() (int, int, error) {
	r, err := xproto.QueryPointer(d.conn, d.root).Reply()
	if err != nil {
		return 0, 0, err
	}
	return int(r.RootX), int(r.RootY), nil
}

// capture reads a region of the screen (real coordinates) as RGBA.
func (d *display) capture(r image.Rectangle) (*image.RGBA, error) {
	r = r.Intersect(image.Rect(0, 0, d.width, d.height))
	if r.Empty() {
		return nil, errors.New("x11: empty capture region")
	}
	img := image.NewRGBA(r)
	// Replies are bounded by the server's maximum request length on the
	// way in only; a band of rows per request keeps each reply moderate.
	const bandBytes = 4 << 20
	rows := max(1, bandBytes/(r.Dx()*4))
	for y := r.Min.Y; y < r.Max.Y; y += rows {
		h := min(rows, r.Max.Y-y)
		rep, err := xproto.GetImage(d.conn, xproto.ImageFormatZPixmap, xproto.Drawable(d.root),
			int16(r.Min.X), int16(y), uint16(r.Dx()), uint16(h), 0xffffffff).Reply()
		if err != nil {
			return nil, fmt.Errorf("x11: GetImage: %w", err)
		}
		if len(rep.Data) < r.Dx()*h*4 {
			return nil, fmt.Errorf("x11: GetImage returned %d bytes for %dx%d", len(rep.Data), r.Dx(), h)
		}
		// ZPixmap at depth 24 is 32 bits per pixel, B G R x (LSB first).
		dst := img.Pix[img.PixOffset(r.Min.X, y):]
		src := rep.Data
		for i := 0; i < r.Dx()*h; i++ {
			dst[4*i], dst[4*i+1], dst[4*i+2], dst[4*i+3] = src[4*i+2], src[4*i+1], src[4*i], 0xff
		}
	}
	return img, nil
}

// atom interns an atom name.
func (d *display) atom(name string) (xproto.Atom, error) {
	if a, ok := d.atoms[name]; ok {
		return a, nil
	}
	r, err := xproto.InternAtom(d.conn, false, uint16(len(name)), name).Reply()
	if err != nil {
		return 0, err
	}
	d.atoms[name] = r.Atom
	return r.Atom, nil
}

// windows lists _NET_CLIENT_LIST in real coordinates.
func (d *display) windows() ([]api.ComputerWindow, error) {
	list, err := d.atom("_NET_CLIENT_LIST")
	if err != nil {
		return nil, err
	}
	activeAtom, err := d.atom("_NET_ACTIVE_WINDOW")
	if err != nil {
		return nil, err
	}
	p, err := xproto.GetProperty(d.conn, false, d.root, list, xproto.AtomWindow, 0, 1024).Reply()
	if err != nil {
		return nil, err
	}
	var active xproto.Window
	if ap, err := xproto.GetProperty(d.conn, false, d.root, activeAtom, xproto.AtomWindow, 0, 1).Reply(); err == nil && len(ap.Value) >= 4 {
		active = xproto.Window(binary.LittleEndian.Uint32(ap.Value))
	}
	out := []api.ComputerWindow{}
	for i := 0; i+4 <= len(p.Value); i += 4 {
		w := xproto.Window(binary.LittleEndian.Uint32(p.Value[i:]))
		g, err := xproto.GetGeometry(d.conn, xproto.Drawable(w)).Reply()
		if err != nil {
			continue // gone meanwhile
		}
		tr, err := xproto.TranslateCoordinates(d.conn, w, d.root, 0, 0).Reply()
		if err != nil {
			continue
		}
		instance, class := d.class(w)
		out = append(out, api.ComputerWindow{ID: fmt.Sprintf("0x%x", uint32(w)), Title: d.title(w), Class: class, Instance: instance,
			X: int(tr.DstX), Y: int(tr.DstY), Width: int(g.Width), Height: int(g.Height), Active: w == active})
	}
	return out, nil
}

// wmStarted reports whether a window manager has finished starting: it
// has announced itself as EWMH asks (the root's _NET_SUPPORTING_WM_CHECK
// names a window whose own _NET_SUPPORTING_WM_CHECK names itself) and has
// taken the input focus over from X's initial PointerRoot, which openbox
// does as the last step of its start-up (focus_nothing, once it has
// managed the windows already there), just before its event loop runs.
func (d *display) wmStarted() (bool, error) {
	check, err := d.atom("_NET_SUPPORTING_WM_CHECK")
	if err != nil {
		return false, err
	}
	get := func(w xproto.Window) (xproto.Window, error) {
		p, err := xproto.GetProperty(d.conn, false, w, check, xproto.AtomWindow, 0, 1).Reply()
		if err != nil || len(p.Value) < 4 {
			return 0, err
		}
		return xproto.Window(binary.LittleEndian.Uint32(p.Value)), nil
	}
	w, err := get(d.root)
	if err != nil || w == 0 {
		return false, err
	}
	if self, err := get(w); err != nil || self != w {
		return false, nil // a stale check window, or one going away: not yet
	}
	f, err := xproto.GetInputFocus(d.conn).Reply()
	if err != nil {
		return false, err
	}
	return f.Focus != xproto.InputFocusNone && f.Focus != xproto.InputFocusPointerRoot, nil
}

// class is a window's WM_CLASS: its instance and class names.
func (d *display) class(w xproto.Window) (instance, class string) {
	p, err := xproto.GetProperty(d.conn, false, w, xproto.AtomWmClass, xproto.AtomString, 0, 64).Reply()
	if err != nil {
		return "", ""
	}
	instance, rest, _ := strings.Cut(string(p.Value), "\x00")
	class, _, _ = strings.Cut(rest, "\x00")
	return instance, class
}

// viewable reports whether the window of list id ("0x…") is mapped with
// all its ancestors, so the server shows it.
func (d *display) viewable(id string) bool {
	v, err := strconv.ParseUint(strings.TrimPrefix(id, "0x"), 16, 32)
	if err != nil {
		return false
	}
	a, err := xproto.GetWindowAttributes(d.conn, xproto.Window(v)).Reply()
	return err == nil && a.MapState == xproto.MapStateViewable
}

// title is a window's _NET_WM_NAME, or WM_NAME.
func (d *display) title(w xproto.Window) string {
	if name, err := d.atom("_NET_WM_NAME"); err == nil {
		if utf8, err := d.atom("UTF8_STRING"); err == nil {
			if p, err := xproto.GetProperty(d.conn, false, w, name, utf8, 0, 256).Reply(); err == nil && len(p.Value) > 0 {
				return string(p.Value)
			}
		}
	}
	if p, err := xproto.GetProperty(d.conn, false, w, xproto.AtomWmName, xproto.AtomString, 0, 256).Reply(); err == nil {
		return string(p.Value)
	}
	return ""
}

// focus asks the window manager to activate w (_NET_ACTIVE_WINDOW) and
// waits until it has.
func (d *display) focus(w xproto.Window, deadline time.Time) error {
	active, err := d.atom("_NET_ACTIVE_WINDOW")
	if err != nil {
		return err
	}
	ev := xproto.ClientMessageEvent{Format: 32, Window: w, Type: active,
		Data: xproto.ClientMessageDataUnionData32New([]uint32{2, 0, 0, 0, 0})}
	mask := uint32(xproto.EventMaskSubstructureRedirect | xproto.EventMaskSubstructureNotify)
	if err := xproto.SendEventChecked(d.conn, false, d.root, mask, string(ev.Bytes())).Check(); err != nil {
		return fmt.Errorf("x11: activate window: %w", err)
	}
	for {
		ap, err := xproto.GetProperty(d.conn, false, d.root, active, xproto.AtomWindow, 0, 1).Reply()
		if err == nil && len(ap.Value) >= 4 && xproto.Window(binary.LittleEndian.Uint32(ap.Value)) == w {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("window 0x%x did not become active", uint32(w))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
