package desktop

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"genesis.dev/sandbox/internal/errdefs"
)

// CodeUnknownKey is the error code of a key name no keysym matches.
const CodeUnknownKey = "unknown_key"

// keysym is an X keysym.
type keysym uint32

// namedKeys maps key names, lower-cased, to keysyms: the X keysym names
// xdotool accepts (Return, BackSpace, Page_Up, F1 …), its modifier aliases
// (ctrl, alt, shift, super) and the names OpenAI's computer-use actions send
// (ENTER, ARROWLEFT, ESC, CMD …).
var namedKeys = func() map[string]keysym {
	m := map[string]keysym{
		"return": 0xff0d, "enter": 0xff0d, "kp_enter": 0xff8d,
		"tab": 0xff09, "escape": 0xff1b, "esc": 0xff1b,
		"backspace": 0xff08, "delete": 0xffff, "del": 0xffff, "insert": 0xff63,
		"home": 0xff50, "end": 0xff57,
		"left": 0xff51, "up": 0xff52, "right": 0xff53, "down": 0xff54,
		"arrowleft": 0xff51, "arrowup": 0xff52, "arrowright": 0xff53, "arrowdown": 0xff54,
		"page_up": 0xff55, "prior": 0xff55, "pageup": 0xff55,
		"page_down": 0xff56, "next": 0xff56, "pagedown": 0xff56,
		"space": 0x20, "print": 0xff61, "menu": 0xff67, "pause": 0xff13,
		"caps_lock": 0xffe5, "capslock": 0xffe5, "num_lock": 0xff7f, "scroll_lock": 0xff14,
		"shift": 0xffe1, "shift_l": 0xffe1, "shift_r": 0xffe2,
		"ctrl": 0xffe3, "control": 0xffe3, "control_l": 0xffe3, "control_r": 0xffe4,
		"alt": 0xffe9, "alt_l": 0xffe9, "alt_r": 0xffea, "option": 0xffe9,
		"super": 0xffeb, "super_l": 0xffeb, "super_r": 0xffec, "win": 0xffeb, "cmd": 0xffeb,
		"meta": 0xffe7, "meta_l": 0xffe7, "meta_r": 0xffe8,
		"minus": '-', "equal": '=', "plus": '+', "comma": ',', "period": '.', "slash": '/',
		"backslash": '\\', "semicolon": ';', "apostrophe": '\'', "grave": '`',
		"bracketleft": '[', "bracketright": ']', "quotedbl": '"', "exclam": '!', "at": '@',
		"numbersign": '#', "dollar": '$', "percent": '%', "asciicircum": '^', "ampersand": '&',
		"asterisk": '*', "parenleft": '(', "parenright": ')', "underscore": '_', "colon": ':',
		"less": '<', "greater": '>', "question": '?', "bar": '|', "braceleft": '{',
		"braceright": '}', "asciitilde": '~',
		"xf86audioraisevolume": 0x1008ff13, "xf86audiolowervolume": 0x1008ff11, "xf86audiomute": 0x1008ff12,
	}
	for i := range 35 {
		m[fmt.Sprintf("f%d", i+1)] = keysym(0xffbe + i)
	}
	for i := range 10 {
		m[fmt.Sprintf("kp_%d", i)] = keysym(0xffb0 + i)
	}
	return m
}()

// runeKeysym is the keysym that types r: Latin-1 keysyms are the code
// point, others are 0x01000000 + the code point (the X convention).
func runeKeysym(r rune) keysym {
	switch {
	case r == '\n' || r == '\r':
		return 0xff0d
	case r == '\t':
		return 0xff09
	case r >= 0x20 && r <= 0x7e, r >= 0xa0 && r <= 0xff:
		return keysym(r)
	default:
		return keysym(0x01000000 + r)
	}
}

// parseKey returns the keysym of one key name: a single character (the
// character's keysym, case kept), or a name of namedKeys (any case).
func parseKey(name string) (keysym, error) {
	if utf8.RuneCountInString(name) == 1 {
		r, _ := utf8.DecodeRuneInString(name)
		if r >= 0x20 && r != 0x7f {
			return runeKeysym(r), nil
		}
	}
	if ks, ok := namedKeys[strings.ToLower(name)]; ok {
		return ks, nil
	}
	return 0, errdefs.WithCode(CodeUnknownKey, fmt.Errorf("unknown key %q (use X keysym names as xdotool does: Return, BackSpace, ctrl, alt, shift, super, F1, Page_Up, a single character …): %w",
		name, errdefs.ErrInvalidArgument))
}

// parseCombo parses an xdotool-style chord such as "ctrl+shift+t" into
// its keysyms, pressed in order and released in reverse. "+" alone, or at
// the end ("ctrl++"), is the plus key.
func parseCombo(combo string) ([]keysym, error) {
	if combo == "" {
		return nil, errdefs.Invalid("empty key")
	}
	var parts []string
	if combo == "+" {
		parts = []string{"+"}
	} else if strings.HasSuffix(combo, "++") {
		parts = append(strings.Split(strings.TrimSuffix(combo, "++"), "+"), "+")
	} else {
		parts = strings.Split(combo, "+")
	}
	out := make([]keysym, 0, len(parts))
	for _, p := range parts {
		ks, err := parseKey(strings.TrimSpace(p))
		if err != nil {
			return nil, err
		}
		out = append(out, ks)
	}
	return out, nil
}

// parseKeyList parses OpenAI's keypress list (["CTRL", "A"]): one chord
// whose single letters are taken lower-case (the chord names the key, not
// the shifted character).
func parseKeyList(keys []string) ([]keysym, error) {
	if len(keys) == 0 {
		return nil, errdefs.Invalid("keys is empty")
	}
	out := make([]keysym, 0, len(keys))
	for _, k := range keys {
		if len(k) == 1 && k[0] >= 'A' && k[0] <= 'Z' {
			k = strings.ToLower(k)
		}
		ks, err := parseKey(k)
		if err != nil {
			return nil, err
		}
		out = append(out, ks)
	}
	return out, nil
}
