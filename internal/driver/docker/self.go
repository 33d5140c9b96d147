package docker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"

	"genesis.dev/sandbox/internal/errdefs"
)

// SelfContainer is the container the service itself runs in, when it runs
// in a container of the daemon it drives (Docker Desktop, or `docker run`
// on a Linux host with the daemon's socket mounted). The daemon resolves
// bind-mount sources on its own host (on Docker Desktop: in its VM), not in
// this container, so every path the service hands it for a bind mount is
// translated through the container's mounts (HostPath); and a mount the
// service makes (a quota-limited workspace) reaches the daemon's host only
// through a mount with shared propagation (MountsReach).
type SelfContainer struct {
	// ID is the container's id.
	ID string
	// Mounts are the container's volumes and bind mounts, longest
	// destination first.
	Mounts []SelfMount
}

// SelfMount is one mount of the service's container.
type SelfMount struct {
	// Type is "bind", "volume" or "tmpfs".
	Type string
	// Name is a volume's name ("" for a bind mount).
	Name string
	// Source is where the mount's content lies on the daemon's host.
	Source string
	// Destination is the mount point in the service's container.
	Destination string
	// Propagation is a bind mount's propagation ("rprivate", "rshared", …);
	// volumes report none and do not propagate.
	Propagation string
}

// mountJSON is one entry of a container inspect's Mounts.
type mountJSON struct {
	Type        string `json:"Type"`
	Name        string `json:"Name"`
	Source      string `json:"Source"`
	Destination string `json:"Destination"`
	Propagation string `json:"Propagation"`
}

// FindSelf returns the container this process runs in when that container
// belongs to the daemon d talks to, or nil when the process runs on the
// daemon's host (or in a container the daemon does not know, such as one
// of another engine). It reads the container's id from this process's
// mount and cgroup tables and asks the daemon about each candidate.
func (d *Driver) FindSelf(ctx context.Context) (*SelfContainer, error) {
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	cg, _ := os.ReadFile("/proc/self/cgroup")
	return d.findSelf(ctx, selfContainerIDs(string(mi), string(cg)))
}

// findSelf asks the daemon about each candidate id and returns the first
// container it knows.
func (d *Driver) findSelf(ctx context.Context, candidates []string) (*SelfContainer, error) {
	ctx, cancel := d.callCtx(ctx, 0)
	defer cancel()
	for _, id := range candidates {
		var c struct {
			ID     string      `json:"Id"`
			Mounts []mountJSON `json:"Mounts"`
		}
		err := d.api.call(ctx, request{op: "inspect container " + id, method: http.MethodGet, path: "/containers/" + id + "/json"}, &c)
		if statusOf(err) == http.StatusNotFound {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("docker: finding the service's own container: %w", err)
		}
		return newSelfContainer(c.ID, c.Mounts), nil
	}
	return nil, nil
}

// newSelfContainer keeps the mounts that have a destination, longest first.
func newSelfContainer(id string, mounts []mountJSON) *SelfContainer {
	s := &SelfContainer{ID: id}
	for _, m := range mounts {
		if !path.IsAbs(m.Destination) {
			continue
		}
		s.Mounts = append(s.Mounts, SelfMount{Type: m.Type, Name: m.Name, Source: m.Source,
			Destination: path.Clean(m.Destination), Propagation: m.Propagation})
	}
	slices.SortStableFunc(s.Mounts, func(a, b SelfMount) int { return len(b.Destination) - len(a.Destination) })
	return s
}

// containerIDPatterns find a 64-hex container id in the mount table (the
// daemon bind-mounts /etc/hostname, /etc/hosts and /etc/resolv.conf from
// its containers/<id>/ directory, whatever the cgroup version) and in the
// cgroup table (cgroup v1: …/docker/<id>, systemd: docker-<id>.scope).
var containerIDPatterns = []*regexp.Regexp{
	regexp.MustCompile(`/containers/([0-9a-f]{64})/(?:hostname|hosts|resolv\.conf)`),
	regexp.MustCompile(`(?:/docker/|docker-)([0-9a-f]{64})(?:\.scope)?\b`),
}

// selfContainerIDs returns the candidate ids of the container this process
// runs in, from its mountinfo and cgroup text, most reliable first, without
// repeats.
func selfContainerIDs(mountinfo, cgroup string) []string {
	var out []string
	for i, text := range []string{mountinfo, cgroup} {
		for _, m := range containerIDPatterns[i].FindAllStringSubmatch(text, -1) {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	return out
}

// errOwnFilesystem marks a path that lies in the service container's own
// file system, which the daemon cannot bind into another container.
var errOwnFilesystem = errors.New("not on a volume or bind mount of the service's container")

// mountOf returns the mount holding p (absolute, cleaned), or false.
func (s *SelfContainer) mountOf(p string) (SelfMount, bool) {
	for _, m := range s.Mounts {
		if p == m.Destination || strings.HasPrefix(p, m.Destination+"/") || m.Destination == "/" {
			return m, true
		}
	}
	return SelfMount{}, false
}

// HostPath returns where path p of the service's container lies on the
// daemon's host. A path in the container's own file system (or on a
// tmpfs) has no such place: errdefs.ErrFailedPrecondition.
func (s *SelfContainer) HostPath(p string) (string, error) {
	if !path.IsAbs(p) {
		return "", errdefs.Invalid("docker: path %q must be absolute", p)
	}
	p = path.Clean(p)
	m, ok := s.mountOf(p)
	if !ok || m.Source == "" || m.Type == "tmpfs" {
		return "", fmt.Errorf("docker: %s is %w %s, so the Docker daemon cannot bind it into a sandbox; mount a volume or host directory there (see docs/docker-desktop.md): %w",
			p, errOwnFilesystem, shortID(s.ID), errdefs.ErrFailedPrecondition)
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(p, m.Destination), "/")
	return path.Join(m.Source, rel), nil
}

// MountsReach reports whether a file system the service mounts at or below
// dir inside its container shows at the same place on the daemon's host,
// where the daemon binds it into a sandbox: only through a bind mount with
// shared propagation. When it does not, the reason says why and what would
// change it.
func (s *SelfContainer) MountsReach(dir string) (bool, string) {
	dir = path.Clean(dir)
	m, ok := s.mountOf(dir)
	switch {
	case !ok:
		return false, fmt.Sprintf("the service runs in container %s and %s is in the container's own file system", shortID(s.ID), dir)
	case m.Type == "bind" && (m.Propagation == "shared" || m.Propagation == "rshared"):
		return true, ""
	case m.Type == "volume":
		return false, fmt.Sprintf("the service runs in container %s and %s is on the volume %s, which does not carry mounts made in the container to the Docker host; "+
			"quotas need the data dir bind-mounted from the host with rshared propagation (see docs/docker-desktop.md)", shortID(s.ID), dir, m.Name)
	default:
		prop := m.Propagation
		if prop == "" {
			prop = "no"
		}
		return false, fmt.Sprintf("the service runs in container %s and %s is on a %s mount of %s with %s propagation, which does not carry mounts made in the container to the Docker host; "+
			"mount it with rshared propagation (see docs/docker-desktop.md)", shortID(s.ID), dir, m.Type, m.Source, prop)
	}
}

// shortID is the 12-character form of a container id.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// MountsReach says whether file systems mounted at or below dir by this
// process are seen by the daemon's bind mounts: always on the daemon's own
// host, through the service container's mounts otherwise (see
// SelfContainer.MountsReach). The local Sandboxer asks it before it offers
// workspace quotas.
func (d *Driver) MountsReach(dir string) (bool, string) {
	if d.cfg.Self == nil {
		return true, ""
	}
	return d.cfg.Self.MountsReach(dir)
}

// hostSource returns bind-mount source src as the daemon's host sees it.
func (d *Driver) hostSource(src string) (string, error) {
	if d.cfg.Self == nil {
		return src, nil
	}
	return d.cfg.Self.HostPath(src)
}
