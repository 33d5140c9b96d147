package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
)

// fakeDaemon serves a scripted Engine API on a Unix socket in a temp dir.
type fakeDaemon struct {
	socket string
	mu     sync.Mutex
	calls  []string // "METHOD /path"
}

func (f *fakeDaemon) record(r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, r.Method+" "+r.URL.Path)
}

func (f *fakeDaemon) called(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// newFakeDaemon serves handler; /version answers apiVersion unless handler
// takes it over.
func newFakeDaemon(t *testing.T, apiVersion string, handler http.HandlerFunc) *fakeDaemon {
	t.Helper()
	return newFakeDaemonVersions(t, versionInfo{APIVersion: apiVersion}, handler)
}

// newFakeDaemonVersions serves handler; /version answers ver unless its
// APIVersion is empty (then handler takes it over).
func newFakeDaemonVersions(t *testing.T, ver versionInfo, handler http.HandlerFunc) *fakeDaemon {
	t.Helper()
	f := &fakeDaemon{socket: filepath.Join(t.TempDir(), "d.sock")}
	l, err := net.Listen("unix", f.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.record(r)
		if r.URL.Path == "/version" && ver.APIVersion != "" {
			json.NewEncoder(w).Encode(ver)
			return
		}
		handler(w, r)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return f
}

func newTestDriver(t *testing.T, socket string, timeout time.Duration) *Driver {
	t.Helper()
	d, err := New(Config{Host: "unix://" + socket, CallTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

func apiErr(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{Host: "tcp://127.0.0.1:2375"},
		{Host: "relative.sock"},
		{CallTimeout: -1},
		{AgentDir: "relative"},
	} {
		if _, err := New(cfg); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("New(%+v) = %v; want ErrInvalidArgument", cfg, err)
		}
	}
	d, err := New(Config{})
	if err != nil || d.cfg.CallTimeout != DefaultCallTimeout || d.cfg.ImportTimeout != DefaultImportTimeout || d.cfg.ProbeTimeout != DefaultProbeTimeout {
		t.Errorf("New(zero) = %+v, %v; want defaults", d, err)
	}
}

func TestErrorClassesByStatus(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status int
		class  error
	}{
		{http.StatusBadRequest, errdefs.ErrInvalidArgument},
		{http.StatusNotFound, errdefs.ErrNotFound},
		{http.StatusConflict, errdefs.ErrConflict},
		{http.StatusInternalServerError, errdefs.ErrInternal},
		{http.StatusServiceUnavailable, errdefs.ErrUnavailable},
		{http.StatusNotImplemented, errdefs.ErrNotImplemented},
	}
	for _, c := range cases {
		t.Run(http.StatusText(c.status), func(t *testing.T) {
			t.Parallel()
			f := newFakeDaemon(t, "1.41", func(w http.ResponseWriter, r *http.Request) {
				apiErr(w, c.status, "scripted failure")
			})
			d := newTestDriver(t, f.socket, 5*time.Second)
			_, err := d.Inspect(t.Context(), "abc")
			if !errors.Is(err, c.class) {
				t.Errorf("err = %v; want class %v", err, c.class)
			}
			if err == nil || !strings.Contains(err.Error(), "scripted failure") {
				t.Errorf("err = %v; want Docker's message", err)
			}
		})
	}
}

func TestDaemonDownIsUnavailable(t *testing.T) {
	t.Parallel()
	d := newTestDriver(t, filepath.Join(t.TempDir(), "absent.sock"), 5*time.Second)
	if _, err := d.Inspect(t.Context(), "abc"); !errors.Is(err, errdefs.ErrUnavailable) {
		t.Errorf("Inspect against no daemon: %v; want ErrUnavailable", err)
	}
	p, err := d.Probe(t.Context())
	if err != nil || p.Healthy || p.Error == "" || p.Driver != "docker" || p.CheckedAt.IsZero() {
		t.Errorf("Probe against no daemon = %+v, %v; want unhealthy result with error, nil error", p, err)
	}
}

func TestStuckDaemonHitsCallTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	f := newFakeDaemon(t, "1.41", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	d := newTestDriver(t, f.socket, 200*time.Millisecond)
	start := time.Now()
	err := d.Remove(context.Background(), "abc")
	if !errors.Is(err, errdefs.ErrDeadlineExceeded) {
		t.Errorf("Remove against a stuck daemon: %v; want ErrDeadlineExceeded", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("Remove took %v; want about the call timeout", el)
	}
}

func TestVersionNegotiation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		min, max string // the daemon's MinAPIVersion and ApiVersion
		want     string
		class    error
	}{
		{"engine 29 (1.44-1.52)", "1.44", "1.52", "/v1.52/", nil},
		{"newer engine than the client", "1.44", "1.60", "/v" + clientMaxAPIVersion + "/", nil},
		{"engine 20.10 (1.12-1.41)", "1.12", "1.41", "/v1.41/", nil},
		{"no MinAPIVersion", "", "1.45", "/v1.45/", nil},
		{"oldest the client speaks", "1.12", "1.40", "/v1.40/", nil},
		{"too old for the client", "1.12", "1.24", "", errdefs.ErrUnavailable},
		{"client too old for the daemon", "1.60", "1.62", "", errdefs.ErrUnavailable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeDaemonVersions(t, versionInfo{APIVersion: c.max, MinAPIVersion: c.min}, func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte("[]"))
			})
			d := newTestDriver(t, f.socket, 5*time.Second)
			for range 2 {
				_, err := d.List(t.Context())
				if c.class != nil {
					if !errors.Is(err, c.class) {
						t.Fatalf("List: %v; want %v", err, c.class)
					}
					// The message names both sides' versions.
					if !strings.Contains(err.Error(), c.max) && !strings.Contains(err.Error(), c.min) ||
						!strings.Contains(err.Error(), clientMaxAPIVersion) && !strings.Contains(err.Error(), clientMinAPIVersion) {
						t.Errorf("List: %q; want a message naming the daemon's and the client's versions", err)
					}
					if n := f.called("GET /v1."); n != 0 {
						t.Errorf("%d versioned calls after a refused negotiation; want none", n)
					}
					return
				}
				if err != nil {
					t.Fatalf("List: %v", err)
				}
			}
			if n := f.called("GET /version"); n != 1 {
				t.Errorf("GET /version called %d times; want once (cached)", n)
			}
			if n := f.called("GET " + c.want + "containers/json"); n != 2 {
				t.Errorf("calls %v; want two list calls under %s", f.calls, c.want)
			}
		})
	}
}

func TestPickVersion(t *testing.T) {
	t.Parallel()
	cases := []struct {
		min, max             string // daemon
		clientMin, clientMax string
		want                 string // "" for a refusal
		msg                  []string
	}{
		{"1.44", "1.52", "1.40", "1.52", "1.52", nil},
		{"1.44", "1.52", "1.40", "1.47", "1.47", nil},
		{"1.12", "1.41", "1.40", "1.52", "1.41", nil},
		{"1.44", "1.52", "1.40", "1.43", "", []string{"1.44", "1.43"}},
		{"1.12", "1.39", "1.40", "1.52", "", []string{"1.39", "1.40"}},
		{"1.12", "", "1.40", "1.52", "", []string{"no API version"}},
		{"1.9", "1.10", "1.9", "1.52", "1.10", nil}, // numeric, not lexical, order
	}
	for _, c := range cases {
		got, err := pickVersion(versionInfo{APIVersion: c.max, MinAPIVersion: c.min}, c.clientMin, c.clientMax)
		if c.want != "" {
			if got != c.want || err != nil {
				t.Errorf("pickVersion(daemon %s-%s, client %s-%s) = %q, %v; want %q", c.min, c.max, c.clientMin, c.clientMax, got, err, c.want)
			}
			continue
		}
		if !errors.Is(err, errdefs.ErrUnavailable) {
			t.Errorf("pickVersion(daemon %s-%s, client %s-%s) = %q, %v; want ErrUnavailable", c.min, c.max, c.clientMin, c.clientMax, got, err)
			continue
		}
		for _, m := range c.msg {
			if !strings.Contains(err.Error(), m) {
				t.Errorf("pickVersion(daemon %s-%s, client %s-%s): %q does not name %s", c.min, c.max, c.clientMin, c.clientMax, err, m)
			}
		}
	}
}

func TestCreateNetworkCheckDuplicateOnlyBelow144(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		version string
		want    bool
	}{{"1.41", true}, {"1.44", false}, {"1.52", false}} {
		t.Run(c.version, func(t *testing.T) {
			t.Parallel()
			bodies := make(chan map[string]any, 1)
			f := newFakeDaemon(t, c.version, func(w http.ResponseWriter, r *http.Request) {
				var m map[string]any
				json.NewDecoder(r.Body).Decode(&m)
				bodies <- m
				w.Write([]byte(`{"Id":"n1"}`))
			})
			d := newTestDriver(t, f.socket, 5*time.Second)
			if _, err := d.CreateNetwork(t.Context(), driver.NetworkSpec{Name: "gen-n1"}); err != nil {
				t.Fatal(err)
			}
			m := <-bodies
			if _, got := m["CheckDuplicate"]; got != c.want {
				t.Errorf("API %s: CheckDuplicate sent = %v; want %v (body %v)", c.version, got, c.want, m)
			}
			if n := f.called("POST /v" + c.version + "/networks/create"); n != 1 {
				t.Errorf("calls %v; want one create under /v%s", f.calls, c.version)
			}
		})
	}
}

// TestCreateCallsAndMissingImage: a create is one create call and one
// inspection, with no look at the image first; a 404 from the create is
// image_not_built only when the image is indeed absent (a missing network
// answers 404 too).
func TestCreateCallsAndMissingImage(t *testing.T) {
	t.Parallel()
	const hardened = `{"Id":"c1","HostConfig":{"CapDrop":["ALL"],"SecurityOpt":["no-new-privileges:true"],"NetworkMode":"none"}}`
	for _, c := range []struct {
		name         string
		createStatus int  // 0: created
		imagePresent bool // what an image inspection finds
		wantCode     string
		wantCalls    map[string]int
	}{
		{name: "created", imagePresent: true, wantCalls: map[string]int{
			"POST /v1.41/containers/create": 1, "GET /v1.41/containers/c1/json": 1, "GET /v1.41/images/img:1/json": 0}},
		{name: "missing image", createStatus: http.StatusNotFound, wantCode: "image_not_built", wantCalls: map[string]int{
			"POST /v1.41/containers/create": 1, "GET /v1.41/images/img:1/json": 1}},
		{name: "other 404", createStatus: http.StatusNotFound, imagePresent: true, wantCalls: map[string]int{
			"POST /v1.41/containers/create": 1, "GET /v1.41/images/img:1/json": 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeDaemon(t, "1.41", func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Path == "/v1.41/images/img:1/json" && c.imagePresent:
					w.Write([]byte("{}"))
				case r.URL.Path == "/v1.41/images/img:1/json":
					apiErr(w, http.StatusNotFound, "No such image")
				case r.URL.Path == "/v1.41/containers/create" && c.createStatus != 0:
					apiErr(w, c.createStatus, "not found")
				case r.URL.Path == "/v1.41/containers/create":
					w.Write([]byte(`{"Id":"c1"}`))
				case r.URL.Path == "/v1.41/containers/c1/json":
					w.Write([]byte(hardened))
				default:
					apiErr(w, http.StatusInternalServerError, "unexpected "+r.URL.Path)
				}
			})
			d := newTestDriver(t, f.socket, 5*time.Second)
			id, err := d.Create(t.Context(), driver.Spec{Image: "img:1"})
			switch {
			case c.createStatus == 0 && (err != nil || id != "c1"):
				t.Errorf("Create = %q, %v; want c1", id, err)
			case c.createStatus != 0 && err == nil:
				t.Error("Create succeeded; want an error")
			case c.wantCode != "" && errdefs.Code(err) != c.wantCode:
				t.Errorf("Create: %v (code %q); want code %q", err, errdefs.Code(err), c.wantCode)
			case c.wantCode == "image_not_built" && (!errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), `build it with "make images"`)):
				t.Errorf("Create: %v; want a failed precondition that says how to build the image", err)
			case c.createStatus != 0 && c.wantCode == "" && (!errors.Is(err, errdefs.ErrNotFound) || errdefs.Code(err) == "image_not_built"):
				t.Errorf("Create: %v; want the daemon's not-found as it was", err)
			}
			for call, n := range c.wantCalls {
				if got := f.called(call); got != n {
					t.Errorf("%s called %d times; want %d (calls %v)", call, got, n, f.calls)
				}
			}
		})
	}
}

func TestCreateRollsBackWhenHardeningIsDropped(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	removed := false
	f := newFakeDaemon(t, "1.41", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1.41/images/"):
			w.Write([]byte("{}"))
		case r.URL.Path == "/v1.41/containers/create":
			w.Write([]byte(`{"Id":"c1","Warnings":["pids limit ignored"]}`))
		case r.Method == http.MethodGet && r.URL.Path == "/v1.41/containers/c1/json":
			// The daemon kept everything but the pids limit.
			w.Write([]byte(`{"Id":"c1","HostConfig":{"CapDrop":["ALL"],"SecurityOpt":["no-new-privileges:true"],"NetworkMode":"none","Memory":67108864,"MemorySwap":67108864}}`))
		case r.Method == http.MethodDelete && r.URL.Path == "/v1.41/containers/c1":
			mu.Lock()
			removed = true
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		default:
			apiErr(w, http.StatusNotFound, "unexpected "+r.URL.Path)
		}
	})
	d := newTestDriver(t, f.socket, 5*time.Second)
	_, err := d.Create(t.Context(), driver.Spec{Image: "img:1", Resources: sandbox.Resources{MemoryMB: 64, Pids: 10}})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "PidsLimit") {
		t.Errorf("Create: %v; want FailedPrecondition naming PidsLimit", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !removed {
		t.Error("container was not removed after the failed create")
	}
}

func TestRemoveWaitsForRemovalInProgress(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	n := 0
	f := newFakeDaemon(t, "1.41", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		if k < 3 {
			apiErr(w, http.StatusConflict, "removal of container c1 is already in progress")
			return
		}
		apiErr(w, http.StatusNotFound, "No such container: c1")
	})
	d := newTestDriver(t, f.socket, 5*time.Second)
	if err := d.Remove(t.Context(), "c1"); err != nil {
		t.Errorf("Remove: %v; want nil once the container is gone", err)
	}
	if got := f.called("DELETE /v1.41/containers/c1"); got != 3 {
		t.Errorf("DELETE called %d times; want 3", got)
	}
}

func TestImportDetectsStreamErrors(t *testing.T) {
	t.Parallel()
	var gotQuery []string
	var gotBody []byte
	var mu sync.Mutex
	f := newFakeDaemon(t, "1.41", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		gotQuery, gotBody = r.URL.Query()["changes"], b
		mu.Unlock()
		w.Write([]byte(`{"status":"Importing"}` + "\n" + `{"errorDetail":{"message":"archive/tar: invalid tar header"},"error":"archive/tar: invalid tar header"}` + "\n"))
	})
	d := newTestDriver(t, f.socket, 5*time.Second)
	err := d.ImportImage(t.Context(), "genesis/x:1", strings.NewReader("not a tar"), map[string]string{"b": `say "hi"`, "a": "1"}, []string{"ENV A=b"})
	if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), "invalid tar header") {
		t.Errorf("ImportImage: %v; want the stream's error", err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"ENV A=b", `LABEL a="1"`, `LABEL b="say \"hi\""`}
	if strings.Join(gotQuery, "|") != strings.Join(want, "|") || string(gotBody) != "not a tar" {
		t.Errorf("changes %q body %q; want %q and the tar streamed", gotQuery, gotBody, want)
	}
}

func TestBuildCreateHardening(t *testing.T) {
	t.Parallel()
	req, err := buildCreate(driver.Spec{
		Image: "img:1", Cmd: []string{"/a", "b"}, CapAdd: []string{"CHOWN"},
		Resources: sandbox.Resources{CPU: 1.5, MemoryMB: 256, Pids: 100},
		Mounts:    []driver.Mount{{Source: "/h", Target: "/c", ReadOnly: true}, {Source: "/h2", Target: "/c2"}},
		Labels:    map[string]string{"x": "y"},
	})
	if err != nil {
		t.Fatal(err)
	}
	hc := req.HostConfig
	if hc.NetworkMode != "none" || hc.CapDrop[0] != "ALL" || hc.CapAdd[0] != "CHOWN" || hc.Memory != 256<<20 || hc.MemorySwap != hc.Memory ||
		hc.NanoCpus != 1.5e9 || *hc.PidsLimit != 100 || *hc.Init || hc.Privileged || hc.SecurityOpt[0] != "no-new-privileges:true" {
		t.Errorf("host config %+v", hc)
	}
	if strings.Join(hc.Binds, " ") != "/h:/c:ro /h2:/c2" || req.Labels[driver.LabelManaged] != "true" || req.Labels["x"] != "y" {
		t.Errorf("binds %v labels %v", hc.Binds, req.Labels)
	}
	if strings.Join(req.Entrypoint, " ") != "/a b" || len(req.Cmd) != 0 || req.Tty || req.AttachStdout || req.AttachStderr {
		t.Errorf("entrypoint %v cmd %v tty %v", req.Entrypoint, req.Cmd, req.Tty)
	}
	for _, bad := range []driver.Spec{
		{},
		{Image: "img:1", Mounts: []driver.Mount{{Source: "rel", Target: "/c"}}},
		{Image: "img:1", Mounts: []driver.Mount{{Source: "/a:b", Target: "/c"}}},
		{Image: "img:1", Resources: sandbox.Resources{MemoryMB: -1}},
		{Image: "img?x=1"},
	} {
		if _, err := buildCreate(bad); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("buildCreate(%+v) = %v; want ErrInvalidArgument", bad, err)
		}
	}
}

func TestParseAgentVersion(t *testing.T) {
	t.Parallel()
	v, err := parseAgentVersion([]byte("noise\n{\"agent\":\"0.1.0\",\"kernel\":\"4.19.0-gvisor\",\"uid\":65534}\n"))
	if err != nil || v.Kernel != "4.19.0-gvisor" || *v.UID != 65534 {
		t.Errorf("parse = %+v, %v", v, err)
	}
	for _, bad := range []string{"", "{}", `{"agent":"x"}`, "not json"} {
		if _, err := parseAgentVersion([]byte(bad)); err == nil {
			t.Errorf("parse(%q) succeeded", bad)
		}
	}
}

func frame(stream byte, s string) []byte {
	h := []byte{stream, 0, 0, 0, 0, 0, 0, 0}
	h[4], h[5], h[6], h[7] = byte(len(s)>>24), byte(len(s)>>16), byte(len(s)>>8), byte(len(s))
	return append(h, s...)
}

func TestDemux(t *testing.T) {
	t.Parallel()
	in := bytes.Join([][]byte{frame(1, "out1 "), frame(2, "err1"), frame(1, "out2"), frame(3, "sys")}, nil)
	var o, e bytes.Buffer
	if err := demux(bytes.NewReader(in), &o, &e); err != nil || o.String() != "out1 out2" || e.String() != "err1" {
		t.Errorf("demux = %q, %q, %v", o.String(), e.String(), err)
	}
	if err := demux(bytes.NewReader(frame(1, "abc")[:9]), &o, &e); err == nil {
		t.Error("truncated frame accepted")
	}
	if err := demux(bytes.NewReader(frame(9, "x")), &o, &e); err == nil {
		t.Error("unknown stream id accepted")
	}
}

func FuzzDemux(f *testing.F) {
	f.Add(frame(1, "hello"))
	f.Add(append(frame(2, "e"), 1, 0, 0))
	f.Add([]byte{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		o := limitedBuffer{max: 1 << 10}
		e := limitedBuffer{max: 1 << 10}
		err := demux(bytes.NewReader(in), &o, &e)
		if len(o.buf) > 1<<10 || len(e.buf) > 1<<10 {
			t.Fatalf("buffers exceeded their limit: %d %d", len(o.buf), len(e.buf))
		}
		if err == nil && len(o.buf)+len(e.buf) > len(in) {
			t.Fatalf("more output (%d) than input (%d)", len(o.buf)+len(e.buf), len(in))
		}
	})
}
