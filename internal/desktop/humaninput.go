package desktop

import (
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"genesis.dev/sandbox/api"
)

// Coalescing of a human's live-view input into trace events.
const (
	// inputIdle ends a run of typing or scrolling, and a click that a
	// second click could still make a double click.
	inputIdle = 700 * time.Millisecond
	// clickSlop is how far (physical pixels) the pointer may move between
	// press and release and still be a click, not a drag.
	clickSlop = 4
	// maxDragPoints bounds the path a drag event keeps.
	maxDragPoints = 64
)

// inputLog turns the RFB input messages a controller's connection
// forwarded into coarse events — click (with its count), drag (its
// path), scroll (direction and wheel clicks), type (a count of
// characters, never the text), key (a named key or a chord with ctrl,
// alt or super) — and hands each to emit. A run of typing or scrolling
// ends at another kind of input or after inputIdle.
type inputLog struct {
	mu   sync.Mutex
	emit func(d map[string]any)

	mask     byte // buttons down
	x, y     int
	press    *pointerRun // the button-1..3 press being followed
	click    map[string]any
	scroll   map[string]any
	typed    int
	mods     map[keysym]bool
	timer    *time.Timer
	finished bool
}

type pointerRun struct {
	button byte
	path   []api.ComputerPoint
	moved  bool
}

func newInputLog(emit func(d map[string]any)) *inputLog {
	return &inputLog{emit: emit, mods: map[keysym]bool{}}
}

var buttonNames = map[byte]string{1: "left", 2: "middle", 3: "right"}

// message records one forwarded client message (a KeyEvent, a
// PointerEvent, a QEMU extended key event or cut text).
func (l *inputLog) message(msg []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.finished || len(msg) == 0 {
		return
	}
	switch msg[0] {
	case 4: // KeyEvent: down-flag, padding, keysym
		if len(msg) >= 8 {
			l.key(msg[1] != 0, keysym(binary.BigEndian.Uint32(msg[4:])))
		}
	case 255: // QEMU extended key event: submessage, down-flag, keysym, keycode
		if len(msg) >= 12 {
			l.key(binary.BigEndian.Uint16(msg[2:]) != 0, keysym(binary.BigEndian.Uint32(msg[4:])))
		}
	case 5: // PointerEvent: mask, x, y
		if len(msg) >= 6 {
			l.pointer(msg[1], int(binary.BigEndian.Uint16(msg[2:])), int(binary.BigEndian.Uint16(msg[4:])))
		}
	case 6:
		l.flushLocked(true)
		l.emit(map[string]any{"type": "paste", "bytes": max(0, len(msg)-8)})
	}
	l.arm()
}

func (l *inputLog) arm() {
	if l.timer == nil {
		l.timer = time.AfterFunc(inputIdle, l.idle)
	} else {
		l.timer.Reset(inputIdle)
	}
}

func (l *inputLog) idle() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.finished {
		l.flushLocked(true)
	}
}

// finish records what is pending; later messages are ignored.
func (l *inputLog) finish() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
	}
	if !l.finished {
		l.flushLocked(true)
		l.finished = true
	}
}

// flushLocked emits the pending run of typing and scrolling, and the
// pending click when all is true.
func (l *inputLog) flushLocked(all bool) {
	if l.typed > 0 {
		l.emit(map[string]any{"type": "type", "chars": l.typed})
		l.typed = 0
	}
	if l.scroll != nil {
		l.emit(l.scroll)
		l.scroll = nil
	}
	if all && l.click != nil {
		l.emit(l.click)
		l.click = nil
	}
}

var modifierKeys = map[keysym]string{
	0xffe3: "ctrl", 0xffe4: "ctrl", 0xffe9: "alt", 0xffea: "alt", 0xffe7: "meta", 0xffe8: "meta",
	0xffeb: "super", 0xffec: "super", 0xffe1: "shift", 0xffe2: "shift", 0xfe03: "alt",
}

// printable reports whether k types a character.
func printable(k keysym) bool {
	return (k >= 0x20 && k <= 0x7e) || (k >= 0xa0 && k <= 0xff) || (k >= 0x01000100 && k <= 0x0110ffff)
}

func (l *inputLog) key(down bool, k keysym) {
	if _, ok := modifierKeys[k]; ok {
		l.mods[k] = down
		return
	}
	if !down {
		return
	}
	chord := ""
	for _, m := range []string{"ctrl", "alt", "meta", "super"} {
		for mk, held := range l.mods {
			if held && modifierKeys[mk] == m {
				chord += m + "+"
				break
			}
		}
	}
	if printable(k) && chord == "" {
		if l.scroll != nil || l.click != nil {
			l.flushLocked(true)
		}
		l.typed++
		return
	}
	l.flushLocked(true)
	name := keyName(k)
	l.emit(map[string]any{"type": "key", "key": chord + name})
}

// keyName names a keysym for the trace: its X name when it has one, the
// character of a printable one (only ever in a chord), or its number.
func keyName(k keysym) string {
	if n, ok := keysymNames[k]; ok {
		return n
	}
	if k >= 0x20 && k <= 0x7e {
		return string(rune(k))
	}
	return fmt.Sprintf("0x%x", uint32(k))
}

var keysymNames = map[keysym]string{
	0xff0d: "Return", 0xff8d: "KP_Enter", 0xff09: "Tab", 0xff1b: "Escape", 0xff08: "BackSpace", 0xffff: "Delete",
	0xff63: "Insert", 0xff50: "Home", 0xff57: "End", 0xff51: "Left", 0xff52: "Up", 0xff53: "Right", 0xff54: "Down",
	0xff55: "Page_Up", 0xff56: "Page_Down", 0xff61: "Print", 0xff67: "Menu", 0xff13: "Pause", 0xffe5: "Caps_Lock",
	0x20: "space",
}

func init() {
	for i := range 24 {
		keysymNames[keysym(0xffbe+i)] = fmt.Sprintf("F%d", i+1)
	}
}

func (l *inputLog) pointer(mask byte, x, y int) {
	prev := l.mask
	l.mask, l.x, l.y = mask, x, y
	// Wheel buttons (4 up, 5 down, 6 left, 7 right) press and release once
	// per click.
	for b, dir := range map[byte]string{4: "up", 5: "down", 6: "left", 7: "right"} {
		bit := byte(1) << (b - 1)
		if mask&bit != 0 && prev&bit == 0 {
			if l.scroll != nil && l.scroll["direction"] != dir {
				l.flushLocked(false)
			}
			if l.typed > 0 || l.click != nil {
				l.flushLocked(true)
			}
			if l.scroll == nil {
				l.scroll = map[string]any{"type": "scroll", "direction": dir, "amount": 0, "x": x, "y": y}
			}
			l.scroll["amount"] = l.scroll["amount"].(int) + 1
		}
	}
	if l.press != nil {
		bit := byte(1) << (l.press.button - 1)
		p := api.ComputerPoint{X: x, Y: y}
		last := l.press.path[len(l.press.path)-1]
		if p != last {
			first := l.press.path[0]
			if abs(p.X-first.X) > clickSlop || abs(p.Y-first.Y) > clickSlop {
				l.press.moved = true
			}
			if len(l.press.path) < maxDragPoints {
				l.press.path = append(l.press.path, p)
			} else {
				l.press.path[len(l.press.path)-1] = p
			}
		}
		if mask&bit == 0 { // released
			l.release(l.press)
			l.press = nil
		}
		return
	}
	for b := byte(1); b <= 3; b++ {
		bit := byte(1) << (b - 1)
		if mask&bit != 0 && prev&bit == 0 {
			l.flushLocked(false)
			l.press = &pointerRun{button: b, path: []api.ComputerPoint{{X: x, Y: y}}}
			return
		}
	}
}

func (l *inputLog) release(p *pointerRun) {
	from, to := p.path[0], p.path[len(p.path)-1]
	if p.moved {
		l.flushLocked(true)
		l.emit(map[string]any{"type": "drag", "button": buttonNames[p.button], "from": from, "to": to, "path": p.path})
		return
	}
	if c := l.click; c != nil {
		at := c["at"].(api.ComputerPoint)
		if c["button"] == buttonNames[p.button] && abs(at.X-from.X) <= clickSlop && abs(at.Y-from.Y) <= clickSlop && c["count"].(int) < 3 {
			c["count"] = c["count"].(int) + 1
			return
		}
		l.emit(c)
	}
	l.click = map[string]any{"type": "click", "button": buttonNames[p.button], "at": from, "count": 1}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
