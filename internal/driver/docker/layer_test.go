package docker

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
)

// TestAddLayer: the base is checked (never pulled), the files are copied
// into a container made from it, the container is committed with the
// image's configuration and removed — also when the commit fails.
func TestAddLayer(t *testing.T) {
	t.Parallel()
	for _, commitFails := range []bool{false, true} {
		var mu sync.Mutex
		var created containerConfig
		var copied, commitQuery string
		var committed containerConfig
		removed := false
		f := newFakeDaemon(t, "1.41", func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case r.URL.Path == "/v1.41/images/genesis/service:1/json":
				w.Write([]byte(`{}`))
			case r.URL.Path == "/v1.41/containers/create":
				json.NewDecoder(r.Body).Decode(&created)
				w.Write([]byte(`{"Id":"tmp1"}`))
			case r.URL.Path == "/v1.41/containers/tmp1/archive" && r.Method == http.MethodPut:
				b, _ := io.ReadAll(r.Body)
				copied = r.URL.Query().Get("path") + " " + string(b)
			case r.URL.Path == "/v1.41/commit":
				commitQuery = r.URL.RawQuery
				json.NewDecoder(r.Body).Decode(&committed)
				if commitFails {
					apiErr(w, http.StatusInternalServerError, "disk full")
					return
				}
				w.Write([]byte(`{"Id":"sha256:abc"}`))
			case r.URL.Path == "/v1.41/containers/tmp1" && r.Method == http.MethodDelete:
				removed = true
				w.WriteHeader(http.StatusNoContent)
			default:
				apiErr(w, http.StatusNotFound, "unexpected "+r.Method+" "+r.URL.Path)
			}
		})
		d := newTestDriver(t, f.socket, 5*time.Second)
		cfg := ImageConfig{Entrypoint: []string{"/usr/bin/tini", "--"}, Cmd: []string{"serve"}, Labels: map[string]string{"a": "b"},
			ExposedPorts: []string{"8080/tcp"}, Volumes: []string{"/data"}}
		id, err := d.AddLayer(t.Context(), LayerSpec{Base: "genesis/service:1", Ref: "genesis/sandbox-service:x", Files: strings.NewReader("TAR"), Config: cfg})
		mu.Lock()
		if commitFails {
			if err == nil || !strings.Contains(err.Error(), "disk full") {
				t.Errorf("AddLayer with a failing commit = %q, %v", id, err)
			}
		} else if err != nil || id != "sha256:abc" {
			t.Errorf("AddLayer = %q, %v", id, err)
		}
		if created.Image != "genesis/service:1" || copied != "/ TAR" || !removed {
			t.Errorf("created from %q, copied %q, removed %v", created.Image, copied, removed)
		}
		if !strings.Contains(commitQuery, "container=tmp1") || !strings.Contains(commitQuery, "repo=genesis%2Fsandbox-service") || !strings.Contains(commitQuery, "tag=x") {
			t.Errorf("commit query %q", commitQuery)
		}
		if _, ok := committed.Volumes["/data"]; !ok || committed.Labels["a"] != "b" || committed.Cmd[0] != "serve" || committed.Image != "" {
			t.Errorf("committed config %+v", committed)
		}
		mu.Unlock()
	}

	f := newFakeDaemon(t, "1.41", func(w http.ResponseWriter, r *http.Request) {
		apiErr(w, http.StatusNotFound, "no such image")
	})
	d := newTestDriver(t, f.socket, 5*time.Second)
	_, err := d.AddLayer(t.Context(), LayerSpec{Base: "genesis/service:1", Ref: "genesis/sandbox-service:x", Files: strings.NewReader(""), Config: ImageConfig{Cmd: []string{"x"}}})
	if !errors.Is(err, errdefs.ErrFailedPrecondition) || errdefs.Code(err) != "image_not_built" {
		t.Errorf("AddLayer on a missing base = %v; want image_not_built", err)
	}
	if n := f.called("POST /v1.41/containers/create"); n != 0 {
		t.Errorf("a container was made from a missing base (%d creates)", n)
	}
	if _, err := d.AddLayer(t.Context(), LayerSpec{Base: "genesis/service:1", Ref: "genesis/sandbox-service:x", Files: strings.NewReader("")}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("AddLayer without entrypoint or command = %v", err)
	}
}
