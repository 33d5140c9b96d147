package main

import (
	"strings"
	"testing"
)

// TestDesktopActionsText: the text output of genesis desktop actions shows
// what each step answered — a launch's job id, the windows (with a step
// that waited for one), the cursor, a screenshot's size, "no windows" for
// an empty list — and a failed step's code and error, with exit 1.
func TestDesktopActionsText(t *testing.T) {
	t.Parallel()
	answer := `{"ok":false,"completed":5,"display":{"width":1280,"height":800},"real":{"width":1280,"height":800},"results":[
		{"index":0,"action":"launch","ok":true,"job_id":"desktop-launch-0123456789abcdef","duration_ms":12},
		{"index":1,"action":"wait_for_window","ok":true,"duration_ms":850,"windows":[{"id":"0x400001","title":"sandbox@sandbox: ~","class":"XTerm","instance":"xterm","x":0,"y":21,"width":484,"height":316,"active":true}]},
		{"index":2,"action":"list_windows","ok":true,"duration_ms":3,"windows":[
			{"id":"0x400001","title":"xterm","x":0,"y":21,"width":484,"height":316,"active":true},
			{"id":"0x600001","title":"a \"b\"","x":10,"y":20,"width":30,"height":40}]},
		{"index":3,"action":"cursor_position","ok":true,"duration_ms":1,"cursor":{"x":512,"y":320}},
		{"index":4,"action":"screenshot","ok":true,"duration_ms":20,"screenshot":"iVBORw0KGgo="},
		{"index":5,"action":"wait_for_window","ok":false,"duration_ms":2000,"code":"window_not_found","error":"no window titled *gedit* showed within 2s"}]}`
	api := newFakeAPI(t, reply(200, answer))
	r := cli(t, api.URL, `[{"action":"launch","command":["xterm"]},{"action":"wait_for_window","title":"xterm"},{"action":"list_windows"},
		{"action":"cursor_position"},{"action":"screenshot"},{"action":"wait_for_window","title":"gedit","duration":2}]`, nil, "desktop", "actions", "sb-1")
	if r.code != 1 {
		t.Errorf("exit %d, want 1 (stderr %q)", r.code, r.stderr)
	}
	jsonEqual(t, api.only(t).Body, `{"actions":[{"action":"launch","command":["xterm"]},{"action":"wait_for_window","title":"xterm"},{"action":"list_windows"},
		{"action":"cursor_position"},{"action":"screenshot"},{"action":"wait_for_window","title":"gedit","duration":2}]}`)
	want := "0\tlaunch\ttrue\t12ms\tjob desktop-launch-0123456789abcdef\n" +
		"1\twait_for_window\ttrue\t850ms\t1 window\n" +
		"\twindow 0x400001 \"sandbox@sandbox: ~\" class XTerm at 0,21 484x316 active\n" +
		"2\tlist_windows\ttrue\t3ms\t2 windows\n" +
		"\twindow 0x400001 \"xterm\" at 0,21 484x316 active\n" +
		"\twindow 0x600001 \"a \\\"b\\\"\" at 10,20 30x40\n" +
		"3\tcursor_position\ttrue\t1ms\tcursor 512,320\n" +
		"4\tscreenshot\ttrue\t20ms\tscreenshot 9 bytes PNG (--json has it)\n" +
		"5\twait_for_window\tfalse\t2000ms\twindow_not_found: no window titled *gedit* showed within 2s\n"
	if r.stdout != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", r.stdout, want)
	}

	api = newFakeAPI(t, reply(200, `{"ok":true,"completed":1,"results":[{"index":0,"action":"list_windows","ok":true,"duration_ms":2}]}`))
	if r := cli(t, api.URL, `[{"action":"list_windows"}]`, nil, "desktop", "actions", "sb-1"); r.code != 0 || r.stdout != "0\tlist_windows\ttrue\t2ms\tno windows\n" {
		t.Errorf("an empty list: exit %d stdout %q", r.code, r.stdout)
	}
	if !strings.Contains(api.only(t).Path, "/computer/actions") {
		t.Error("not the actions route")
	}
}
