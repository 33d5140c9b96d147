package main

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

func TestImages(t *testing.T) {
	t.Parallel()
	api := newFakeAPI(t, reply(200, `{"items":[
		{"name":"tool-basic","ref":"genesis/tool-basic:1","profiles":["tool-basic"],"status":"present"},
		{"name":"code-python-data","ref":"genesis/code-python-data:2","profiles":["code-python-data"],"status":"building","build_command":"make images",
		 "build":{"state":"building","step":"packages","step_number":2,"steps":4,"done":30,"total":60,"unit":"packages","percent":60,
		          "summary":"building 60%: packages (2/4) 30/60 packages","detail":"Unpacking python3-numpy"}},
		{"name":"desktop-vnc","ref":"genesis/desktop-vnc:3","profiles":["desktop-vnc"],"status":"queued","build_command":"make images",
		 "build":{"state":"queued","percent":0,"summary":"queued"}},
		{"name":"tool-node","ref":"genesis/tool-node:4","profiles":["tool-node"],"status":"failed","build_command":"make images",
		 "build":{"state":"failed","percent":12,"summary":"failed: npm ci","error":"npm ci: exit status 1\nlog"}},
		{"name":"skill-python-basic","ref":"genesis/skill-python-basic:5","profiles":["skill-python-basic"],"status":"not_built","build_command":"make images"}]}`))
	r := cli(t, api.URL, "", nil, "images")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	want := "NAME                STATUS     PROGRESS                                                     PROFILES\n" +
		"tool-basic          present    -                                                            tool-basic\n" +
		"code-python-data    building   60%: packages (2/4) 30/60 packages: Unpacking python3-numpy  code-python-data\n" +
		"desktop-vnc         queued     -                                                            desktop-vnc\n" +
		"tool-node           failed     -                                                            tool-node\n" +
		"skill-python-basic  not built  -                                                            skill-python-basic\n" +
		"tool-node: the build failed: npm ci: exit status 1\n" +
		"skill-python-basic: image genesis/skill-python-basic:5 is not built (make images)\n"
	if r.stdout != want {
		t.Errorf("stdout =\n%s\nwant\n%s", r.stdout, want)
	}
	if req := api.only(t); req.Path != "/v1/images" {
		t.Errorf("path %s", req.Path)
	}
}

// TestImagesFollow prints a line whenever an image moves on, and ends
// when nothing is queued or building: exit 0 when all are present, 1
// when a build failed.
func TestImagesFollow(t *testing.T) {
	t.Parallel()
	answers := []string{
		`{"items":[{"name":"a","ref":"r","profiles":["a"],"status":"building","build":{"state":"building","step":"bootstrap","step_number":1,"steps":3,"done":5,"unit":"packages","percent":3,"summary":"building 3%: bootstrap (1/3) 5 packages"}},
		           {"name":"b","ref":"r","profiles":["b"],"status":"queued","build":{"state":"queued","percent":0,"summary":"queued"}}]}`,
		`{"items":[{"name":"a","ref":"r","profiles":["a"],"status":"present"},
		           {"name":"b","ref":"r","profiles":["b"],"status":"failed","build":{"state":"failed","percent":40,"summary":"failed: x","error":"x"}}]}`,
	}
	var n atomic.Int32
	api := newFakeAPI(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		i := min(int(n.Add(1))-1, len(answers)-1)
		reply(200, answers[i])(w, r, body)
	})
	r := cli(t, api.URL, "", nil, "images", "--follow")
	if r.code != 1 {
		t.Errorf("exit %d, want 1 (a build failed): %s", r.code, r.stderr)
	}
	want := []string{
		"12:00:00 a: building 3%: bootstrap (1/3) 5 packages",
		"12:00:00 b: queued",
		"12:00:00 a: present",
		"12:00:00 b: failed: x",
	}
	if got := strings.Split(strings.TrimSpace(r.stdout), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stdout =\n%s\nwant\n%s", r.stdout, strings.Join(want, "\n"))
	}
}
