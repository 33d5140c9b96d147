package docker

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/driver"
	"genesis.dev/sandbox/internal/errdefs"
)

const (
	idA = "4f1c0e0b8a7d6c5b4a3928171615141312111009080706050403020100aabbcc"
	idB = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

func TestSelfContainerIDs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, mountinfo, cgroup string
		want                    []string
	}{
		{name: "host", mountinfo: "27 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n", cgroup: "0::/init.scope\n"},
		{
			name: "container on cgroup v2",
			mountinfo: "600 599 0:50 / / rw,relatime - overlay overlay rw\n" +
				"620 600 8:1 /var/lib/docker/containers/" + idA + "/resolv.conf /etc/resolv.conf rw,relatime - ext4 /dev/sda1 rw\n" +
				"621 600 8:1 /var/lib/docker/containers/" + idA + "/hostname /etc/hostname rw,relatime - ext4 /dev/sda1 rw\n",
			cgroup: "0::/\n",
			want:   []string{idA},
		},
		{
			name:      "docker root on its own file system",
			mountinfo: "621 600 8:17 /containers/" + idA + "/hosts /etc/hosts rw - ext4 /dev/sdb1 rw\n",
			want:      []string{idA},
		},
		{name: "cgroup v1", cgroup: "12:pids:/docker/" + idB + "\n11:memory:/docker/" + idB + "\n", want: []string{idB}},
		{name: "systemd cgroup driver", cgroup: "0::/system.slice/docker-" + idB + ".scope\n", want: []string{idB}},
		{
			name:      "mount table first",
			mountinfo: "621 600 8:1 /var/lib/docker/containers/" + idA + "/hostname /etc/hostname rw - ext4 /dev/sda1 rw\n",
			cgroup:    "12:pids:/docker/" + idB + "\n",
			want:      []string{idA, idB},
		},
		{name: "a volume named like an id is no candidate", mountinfo: "7 1 8:1 /var/lib/docker/volumes/" + idA + "/_data /data rw - ext4 /dev/sda1 rw\n"},
	}
	for _, c := range cases {
		if got := selfContainerIDs(c.mountinfo, c.cgroup); !slices.Equal(got, c.want) {
			t.Errorf("%s: ids = %v, want %v", c.name, got, c.want)
		}
	}
}

func testSelf() *SelfContainer {
	return newSelfContainer(idA, []mountJSON{
		{Type: "bind", Source: "/var/run/docker.sock", Destination: "/var/run/docker.sock", Propagation: "rprivate"},
		{Type: "volume", Name: "genesis-data", Source: "/var/lib/docker/volumes/genesis-data/_data", Destination: "/var/lib/genesis"},
		{Type: "bind", Source: "/srv/genesis-shared", Destination: "/var/lib/genesis/shared", Propagation: "rshared"},
		{Type: "bind", Source: "/etc/genesis", Destination: "/etc/genesis/", Propagation: "rprivate"},
		{Type: "tmpfs", Destination: "/scratch"},
	})
}

func TestSelfContainerHostPath(t *testing.T) {
	t.Parallel()
	s := testSelf()
	for in, want := range map[string]string{
		"/var/lib/genesis":                          "/var/lib/docker/volumes/genesis-data/_data",
		"/var/lib/genesis/agent":                    "/var/lib/docker/volumes/genesis-data/_data/agent",
		"/var/lib/genesis/sandboxes/sbx_1/run/":     "/var/lib/docker/volumes/genesis-data/_data/sandboxes/sbx_1/run",
		"/var/lib/genesis/shared/x":                 "/srv/genesis-shared/x",
		"/etc/genesis/ca.pem":                       "/etc/genesis/ca.pem",
		"/var/lib/genesis/../genesis/sandboxes/sbx": "/var/lib/docker/volumes/genesis-data/_data/sandboxes/sbx",
	} {
		got, err := s.HostPath(in)
		if err != nil || got != want {
			t.Errorf("HostPath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"/var/lib/genesisX/agent", "/tmp/data", "/scratch/x", "/"} {
		_, err := s.HostPath(in)
		if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "docs/docker-desktop.md") {
			t.Errorf("HostPath(%q) = %v; want a failed precondition pointing at the docs", in, err)
		}
	}
	if _, err := s.HostPath("relative"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("HostPath(relative) = %v", err)
	}
}

func TestSelfContainerMountsReach(t *testing.T) {
	t.Parallel()
	s := testSelf()
	cases := []struct {
		dir  string
		ok   bool
		want string
	}{
		{dir: "/var/lib/genesis/shared/sandboxes", ok: true},
		{dir: "/var/lib/genesis/sandboxes", want: "volume genesis-data"},
		{dir: "/etc/genesis/sandboxes", want: "rprivate propagation"},
		{dir: "/opt/data/sandboxes", want: "own file system"},
	}
	for _, c := range cases {
		ok, why := s.MountsReach(c.dir)
		if ok != c.ok || !strings.Contains(why, c.want) {
			t.Errorf("MountsReach(%q) = %v, %q; want %v, containing %q", c.dir, ok, why, c.ok, c.want)
		}
	}
	var d Driver // on the daemon's host every mount is the daemon's
	if ok, why := d.MountsReach("/anything"); !ok || why != "" {
		t.Errorf("host MountsReach = %v, %q", ok, why)
	}
}

// TestFindSelfAndTranslatedBinds: the daemon is asked about each candidate
// id until it knows one, and a driver configured with that container hands
// the daemon host paths for every bind mount, refusing a source that lies
// in the container's own file system before anything is created.
func TestFindSelfAndTranslatedBinds(t *testing.T) {
	t.Parallel()
	var createBody createRequest
	f := newFakeDaemon(t, "1.41", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1.41/containers/"+idB+"/json":
			apiErr(w, http.StatusNotFound, "no such container")
		case r.URL.Path == "/v1.41/containers/"+idA+"/json" && r.Method == http.MethodGet:
			json.NewEncoder(w).Encode(map[string]any{"Id": idA, "Mounts": []map[string]string{
				{"Type": "volume", "Name": "genesis-data", "Source": "/var/lib/docker/volumes/genesis-data/_data", "Destination": "/var/lib/genesis"},
			}})
		case strings.HasPrefix(r.URL.Path, "/v1.41/images/"):
			w.Write([]byte(`{}`))
		case r.URL.Path == "/v1.41/containers/create":
			b, _ := io.ReadAll(r.Body)
			json.Unmarshal(b, &createBody)
			json.NewEncoder(w).Encode(map[string]string{"Id": "c1"})
		case r.URL.Path == "/v1.41/containers/c1/json":
			json.NewEncoder(w).Encode(map[string]any{"Id": "c1", "HostConfig": createBody.HostConfig})
		default:
			apiErr(w, http.StatusNotFound, "unexpected "+r.URL.Path)
		}
	})
	d := newTestDriver(t, f.socket, 5*time.Second)
	self, err := d.findSelf(t.Context(), []string{idB, idA})
	if err != nil || self == nil || self.ID != idA {
		t.Fatalf("findSelf = %+v, %v; want container %s", self, err, idA)
	}
	if none, err := d.findSelf(t.Context(), []string{idB}); none != nil || err != nil {
		t.Errorf("findSelf(unknown) = %+v, %v; want nil, nil (not a container of this daemon)", none, err)
	}

	dd, err := New(Config{Host: "unix://" + f.socket, CallTimeout: 5 * time.Second, Self: self})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dd.Close)
	spec := driver.Spec{Name: "s1", Image: "genesis/x:1", Mounts: []driver.Mount{
		{Source: "/var/lib/genesis/agent", Target: "/.genesis", ReadOnly: true},
		{Source: "/var/lib/genesis/sandboxes/sbx_1/run", Target: "/run/genesis"},
	}}
	if _, err := dd.Create(t.Context(), spec); err != nil {
		t.Fatalf("Create: %v", err)
	}
	want := "/var/lib/docker/volumes/genesis-data/_data/agent:/.genesis:ro /var/lib/docker/volumes/genesis-data/_data/sandboxes/sbx_1/run:/run/genesis"
	if got := strings.Join(createBody.HostConfig.Binds, " "); got != want {
		t.Errorf("binds = %s, want %s", got, want)
	}
	if spec.Mounts[0].Source != "/var/lib/genesis/agent" {
		t.Errorf("the caller's spec was changed: %+v", spec.Mounts)
	}

	creates := f.called("POST /v1.41/containers/create")
	spec.Mounts = append(spec.Mounts, driver.Mount{Source: "/opt/inside", Target: "/x"})
	if _, err := dd.Create(t.Context(), spec); !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "/opt/inside") {
		t.Errorf("Create with a source in the container's own file system = %v; want a failed precondition naming it", err)
	}
	if n := f.called("POST /v1.41/containers/create"); n != creates {
		t.Errorf("a refused create reached the daemon (%d creates, want %d)", n, creates)
	}
}
