package config

import (
	"path"
	"slices"
	"strings"
	"time"
)

// BrowserSpec makes a profile a browser profile: its sandboxes run a
// Chromium whose DevTools protocol the service serves at
// /v1/sandboxes/{id}/browser (CDP, the Playwright protocol and the actions
// API). The browser itself is one of the profile's services.
type BrowserSpec struct {
	// CDPPort is the port of Chromium's DevTools protocol on the sandbox's
	// loopback.
	CDPPort int `yaml:"cdp_port"`
	// PlaywrightPort, if set, is the port of the Playwright protocol server
	// (path /playwright) on the sandbox's loopback.
	PlaywrightPort int `yaml:"playwright_port"`
	// DownloadsDir is where the browser's downloads land (absolute, under a
	// file root of the profile).
	DownloadsDir string `yaml:"downloads_dir"`
	// ProfileDir is Chromium's user-data-dir inside the sandbox, which
	// saving and loading a browser profile archive; with Service set it
	// must be under a file root of the profile.
	ProfileDir string `yaml:"profile_dir"`
	// Service is the profile service that runs Chromium; saving or
	// loading a profile stops it and starts it again. Without it a
	// profile can be neither saved nor loaded.
	Service string `yaml:"service"`
	// ActionTimeout bounds one action of the actions API that names no
	// timeout; MaxActionTimeout bounds any.
	ActionTimeout    time.Duration `yaml:"action_timeout"`
	MaxActionTimeout time.Duration `yaml:"max_action_timeout"`
	// MaxActions bounds the actions of one request.
	MaxActions int `yaml:"max_actions"`
}

// validateBrowser checks the browser key of every profile that has one.
func (c *Config) validateBrowser(v *problems) {
	for i := range c.Profiles {
		p := &c.Profiles[i]
		b := p.Browser
		if b == nil {
			continue
		}
		key := "profiles." + p.Name + ".browser"
		if b.CDPPort < 1 || b.CDPPort > 65535 {
			v.add(key+".cdp_port", "%d is not a port", b.CDPPort)
		} else if !p.Ports.Allows(b.CDPPort) {
			v.add(key+".cdp_port", "%d is not allowed by the profile's ports policy", b.CDPPort)
		}
		if b.PlaywrightPort != 0 && (b.PlaywrightPort < 1 || b.PlaywrightPort > 65535 || !p.Ports.Allows(b.PlaywrightPort)) {
			v.add(key+".playwright_port", "%d is not a port the profile's ports policy allows", b.PlaywrightPort)
		}
		for _, d := range []struct{ name, dir string }{{"downloads_dir", b.DownloadsDir}, {"profile_dir", b.ProfileDir}} {
			if d.dir == "" || !path.IsAbs(d.dir) || path.Clean(d.dir) != d.dir || d.dir == "/" {
				v.add(key+"."+d.name, "%q must be an absolute, clean path below /", d.dir)
			}
		}
		if b.Service != "" {
			if !slices.ContainsFunc(p.Services, func(s ServiceSpec) bool { return s.Name == b.Service }) {
				v.add(key+".service", "%q is not a service of the profile", b.Service)
			}
			if !slices.ContainsFunc(p.Roots(), func(r string) bool { return b.ProfileDir == r || strings.HasPrefix(b.ProfileDir, r+"/") }) {
				v.add(key+".profile_dir", "%q is not under a file root of the profile (%s); saving and loading a profile need it", b.ProfileDir, strings.Join(p.Roots(), ", "))
			}
		}
		if b.ActionTimeout <= 0 || b.MaxActionTimeout < b.ActionTimeout {
			v.add(key+".action_timeout", "want 0 < action_timeout (%v) <= max_action_timeout (%v)", b.ActionTimeout, b.MaxActionTimeout)
		}
		if b.MaxActions < 1 {
			v.add(key+".max_actions", "must be at least 1, got %d", b.MaxActions)
		}
	}
}
