package desktop

import (
	"encoding/binary"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

func keyMsg(down bool, k uint32) []byte {
	m := []byte{4, 0, 0, 0, 0, 0, 0, 0}
	if down {
		m[1] = 1
	}
	binary.BigEndian.PutUint32(m[4:], k)
	return m
}

func ptrMsg(mask byte, x, y int) []byte {
	m := []byte{5, mask, 0, 0, 0, 0}
	binary.BigEndian.PutUint16(m[2:], uint16(x))
	binary.BigEndian.PutUint16(m[4:], uint16(y))
	return m
}

func typeMsgs(text string) [][]byte {
	var out [][]byte
	for _, r := range text {
		out = append(out, keyMsg(true, uint32(r)), keyMsg(false, uint32(r)))
	}
	return out
}

// TestInputLogCoalesces feeds the messages of a person's session and
// checks the events: typing as a count only, named keys and chords,
// a double click, a drag with its path, a scroll run, a paste's size.
func TestInputLogCoalesces(t *testing.T) {
	var mu sync.Mutex
	var got []map[string]any
	l := newInputLog(func(d map[string]any) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, d)
	})
	var msgs [][]byte
	msgs = append(msgs, typeMsgs("hunter2!")...)
	msgs = append(msgs, keyMsg(true, 0xff0d), keyMsg(false, 0xff0d))
	msgs = append(msgs, keyMsg(true, 0xffe3), keyMsg(true, 'c'), keyMsg(false, 'c'), keyMsg(false, 0xffe3))
	// A double click at (100, 100) (a pixel of jitter), then a drag.
	msgs = append(msgs, ptrMsg(0, 100, 100), ptrMsg(1, 100, 100), ptrMsg(0, 100, 100), ptrMsg(1, 101, 100), ptrMsg(0, 101, 100))
	msgs = append(msgs, ptrMsg(1, 10, 10), ptrMsg(1, 50, 20), ptrMsg(1, 90, 30), ptrMsg(0, 90, 30))
	// Three wheel clicks down, one up.
	for range 3 {
		msgs = append(msgs, ptrMsg(16, 5, 5), ptrMsg(0, 5, 5))
	}
	msgs = append(msgs, ptrMsg(8, 5, 5), ptrMsg(0, 5, 5))
	msgs = append(msgs, append([]byte{6, 0, 0, 0, 0, 0, 0, 5}, "hello"...))
	msgs = append(msgs, typeMsgs("ab")...)
	for _, m := range msgs {
		l.message(m)
	}
	l.finish()
	l.message(keyMsg(true, 'z')) // after finish: ignored
	l.finish()

	b, _ := json.Marshal(got)
	if strings.Contains(string(b), "hunter") {
		t.Fatalf("typed text in the events: %s", b)
	}
	want := []string{
		`{"chars":8,"type":"type"}`,
		`{"key":"Return","type":"key"}`,
		`{"key":"ctrl+c","type":"key"}`,
		`{"at":{"x":100,"y":100},"button":"left","count":2,"type":"click"}`,
		`{"button":"left","from":{"x":10,"y":10},"path":[{"x":10,"y":10},{"x":50,"y":20},{"x":90,"y":30}],"to":{"x":90,"y":30},"type":"drag"}`,
		`{"amount":3,"direction":"down","type":"scroll","x":5,"y":5}`,
		`{"amount":1,"direction":"up","type":"scroll","x":5,"y":5}`,
		`{"bytes":5,"type":"paste"}`,
		`{"chars":2,"type":"type"}`,
	}
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d: %s", len(got), len(want), b)
	}
	for i, w := range want {
		g, _ := json.Marshal(got[i])
		if string(g) != w {
			t.Errorf("event %d = %s, want %s", i, g, w)
		}
	}
}

// TestInputLogIdleEndsARun checks that a pause ends a run of typing
// (the timer flushes it) and that a later run is an event of its own.
func TestInputLogIdleEndsARun(t *testing.T) {
	ch := make(chan map[string]any, 4)
	l := newInputLog(func(d map[string]any) { ch <- d })
	defer l.finish()
	for _, m := range typeMsgs("abc") {
		l.message(m)
	}
	if d := <-ch; d["chars"] != 3 {
		t.Fatalf("first run %v", d)
	}
	for _, m := range typeMsgs("de") {
		l.message(m)
	}
	if d := <-ch; d["chars"] != 2 {
		t.Fatalf("second run %v", d)
	}
}
