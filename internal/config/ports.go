package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// PortPolicy says which TCP ports inside a sandbox the service may reach
// for a caller (HTTP proxy, WebSocket/TCP forwarding, preview links). The
// sandbox's own network mode does not matter: the service reaches the
// port through the agent, on the sandbox's loopback.
type PortPolicy struct {
	// Allow lists single ports ("8000") and ranges ("1024-65535"). Empty
	// means DefaultPortRange. An empty list cannot mean "none": a profile
	// that exposes nothing says `disabled: true`.
	Allow []string `yaml:"allow"`
	// Disabled turns port access off for the profile.
	Disabled bool `yaml:"disabled"`
}

// DefaultPortRange is the port range a profile allows when it names none:
// the unprivileged ports.
const DefaultPortRange = "1024-65535"

// Allows reports whether port may be reached under p.
func (p PortPolicy) Allows(port int) bool {
	if p.Disabled || port < 1 || port > 65535 {
		return false
	}
	allow := p.Allow
	if len(allow) == 0 {
		allow = []string{DefaultPortRange}
	}
	for _, r := range allow {
		lo, hi, err := parsePortRange(r)
		if err == nil && port >= lo && port <= hi {
			return true
		}
	}
	return false
}

// parsePortRange reads "N" or "LO-HI".
func parsePortRange(s string) (lo, hi int, err error) {
	a, b, isRange := strings.Cut(strings.TrimSpace(s), "-")
	if lo, err = strconv.Atoi(a); err != nil {
		return 0, 0, fmt.Errorf("%q is not a port or a range LO-HI", s)
	}
	hi = lo
	if isRange {
		if hi, err = strconv.Atoi(b); err != nil {
			return 0, 0, fmt.Errorf("%q is not a port or a range LO-HI", s)
		}
	}
	if lo < 1 || hi > 65535 || lo > hi {
		return 0, 0, fmt.Errorf("%q: ports are 1-65535 and LO ≤ HI", s)
	}
	return lo, hi, nil
}

// EndpointSpec names a port a profile's sandboxes serve, so that callers
// find it by name: GET /v1/sandboxes/{id} lists each with its URL.
type EndpointSpec struct {
	Name     string `yaml:"name"`
	Port     int    `yaml:"port"`
	Protocol string `yaml:"protocol"` // http (default) | websocket | tcp
}

// Endpoint protocols.
const (
	EndpointHTTP      = "http"
	EndpointWebSocket = "websocket"
	EndpointTCP       = "tcp"
)

// ServiceSpec is a long-running command the service starts in each sandbox
// of the profile once it is ready, and restarts with backoff when it exits,
// until the sandbox ends. Its output is kept like a background job's.
type ServiceSpec struct {
	Name    string            `yaml:"name"`
	Command []string          `yaml:"command"`
	Cwd     string            `yaml:"cwd"`
	Env     map[string]string `yaml:"env"`
	// Restart: always (default) | on-failure | never.
	Restart string `yaml:"restart"`
	// ReadyPort, when set, is a port the service listens on; the service
	// counts as ready once a TCP dial to it succeeds.
	ReadyPort int `yaml:"ready_port"`
	// ReadyPath, when set (with ReadyPort), makes readiness an HTTP GET of
	// this path on the port answered with a 2xx or 3xx status: a server
	// that accepts connections before it serves (Chromium's DevTools)
	// counts as ready only when it answers.
	ReadyPath string `yaml:"ready_path"`
}

// Service restart policies.
const (
	RestartAlways    = "always"
	RestartOnFailure = "on-failure"
	RestartNever     = "never"
)

// PortsConfig holds the service-wide settings of port access.
type PortsConfig struct {
	// LinkKeyFile holds the key preview links are signed with. Relative
	// paths are under the data dir; it is made (random, 0600) when missing.
	// Replicas that share a store must share this file.
	LinkKeyFile string `yaml:"link_key_file"`
	// MaxLinkTTL bounds a preview link's lifetime.
	MaxLinkTTL time.Duration `yaml:"max_link_ttl"`
	// DialTimeout bounds connecting to a port inside a sandbox.
	DialTimeout time.Duration `yaml:"dial_timeout"`
}

var serviceName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// validatePorts checks the port, endpoint and service keys of every
// profile and the ports section, recording one problem per bad key.
func (c *Config) validatePorts(v *problems) {
	bad := v.add
	if c.Ports.MaxLinkTTL <= 0 {
		bad("ports.max_link_ttl", "must be a positive duration, got %v", c.Ports.MaxLinkTTL)
	}
	if c.Ports.DialTimeout <= 0 {
		bad("ports.dial_timeout", "must be a positive duration, got %v", c.Ports.DialTimeout)
	}
	for i := range c.Profiles {
		p := &c.Profiles[i]
		key := "profiles." + p.Name
		for j, r := range p.Ports.Allow {
			if _, _, err := parsePortRange(r); err != nil {
				bad(fmt.Sprintf("%s.ports.allow[%d]", key, j), "%v", err)
			}
		}
		seen := map[string]bool{}
		for j, e := range p.Endpoints {
			k := fmt.Sprintf("%s.endpoints[%d]", key, j)
			if !serviceName.MatchString(e.Name) {
				bad(k+".name", "%q: lowercase letters, digits, - and _", e.Name)
			}
			if seen[e.Name] {
				bad(k+".name", "%q appears twice", e.Name)
			}
			seen[e.Name] = true
			switch e.Protocol {
			case "", EndpointHTTP, EndpointWebSocket, EndpointTCP:
			default:
				bad(k+".protocol", "%q: want http, websocket or tcp", e.Protocol)
			}
			if !p.Ports.Allows(e.Port) {
				bad(k+".port", "%d is not allowed by the profile's ports policy", e.Port)
			}
		}
		seen = map[string]bool{}
		for j, s := range p.Services {
			k := fmt.Sprintf("%s.services[%d]", key, j)
			if !serviceName.MatchString(s.Name) {
				bad(k+".name", "%q: lowercase letters, digits, - and _", s.Name)
			}
			if seen[s.Name] {
				bad(k+".name", "%q appears twice", s.Name)
			}
			seen[s.Name] = true
			if len(s.Command) == 0 || s.Command[0] == "" {
				bad(k+".command", "must name a program")
			}
			switch s.Restart {
			case "", RestartAlways, RestartOnFailure, RestartNever:
			default:
				bad(k+".restart", "%q: want always, on-failure or never", s.Restart)
			}
			if s.ReadyPort != 0 && (s.ReadyPort < 1 || s.ReadyPort > 65535) {
				bad(k+".ready_port", "%d is not a port", s.ReadyPort)
			}
			switch {
			case s.ReadyPath == "":
			case s.ReadyPort == 0:
				bad(k+".ready_path", "needs ready_port (the port to GET it on)")
			case !strings.HasPrefix(s.ReadyPath, "/") || strings.ContainsAny(s.ReadyPath, " \t\r\n"):
				bad(k+".ready_path", "%q: an absolute URL path without spaces, like /healthz", s.ReadyPath)
			}
		}
	}
}
