package config

import (
	"fmt"
	"net"
	"net/url"
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
	// PreviewURL is the template of preview origins: every preview (one
	// sandbox × one port) is served on a host of its own, "*" standing for
	// "{port}-{sandbox}" (docs/ports.md). Empty: http://*.localhost with
	// the public URL's port, which browsers resolve to loopback with no DNS
	// set-up. In production, a wildcard domain of its own, apart from the
	// API's site (https://*.preview.example.net), with wildcard DNS and a
	// certificate or a TLS terminator in front.
	PreviewURL string `yaml:"preview_url"`
	// PreviewListen, if set, is a second listener that serves previews only
	// (for example behind a TLS terminator for the preview domain); the
	// main listener serves them too, by their Host.
	PreviewListen string `yaml:"preview_listen"`
}

// PublicBaseURL is the service's public base URL without a trailing
// slash: public_url, or http://{addr} with an unspecified host taken as
// 127.0.0.1.
func (c *Config) PublicBaseURL() string {
	if c.PublicURL != "" {
		return strings.TrimRight(c.PublicURL, "/")
	}
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return "http://" + c.Addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// PreviewTemplate is ports.preview_url, or its default: http://*.localhost
// on the public URL's port (https when the public URL is).
func (c *Config) PreviewTemplate() string {
	if c.Ports.PreviewURL != "" {
		return c.Ports.PreviewURL
	}
	u, err := url.Parse(c.PublicBaseURL())
	if err != nil || u.Host == "" {
		return "http://*.localhost"
	}
	t := u.Scheme + "://*.localhost"
	if p := u.Port(); p != "" {
		t += ":" + p
	}
	return t
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
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			bad("public_url", "must be an http or https URL such as https://genesis.example.com, got %q", c.PublicURL)
		}
	}
	if t := c.Ports.PreviewURL; t != "" {
		u, err := url.Parse(t)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !strings.HasPrefix(u.Host, "*.") || (u.Path != "" && u.Path != "/") {
			bad("ports.preview_url", `must be http(s)://*.DOMAIN[:PORT] ("*" stands for {port}-{sandbox}), got %q`, t)
		}
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
