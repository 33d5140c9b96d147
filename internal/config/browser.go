package config

import (
	"path"
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
	// browser state save and load archive.
	ProfileDir string `yaml:"profile_dir"`
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
		if b.ActionTimeout <= 0 || b.MaxActionTimeout < b.ActionTimeout {
			v.add(key+".action_timeout", "want 0 < action_timeout (%v) <= max_action_timeout (%v)", b.ActionTimeout, b.MaxActionTimeout)
		}
		if b.MaxActions < 1 {
			v.add(key+".max_actions", "must be at least 1, got %d", b.MaxActions)
		}
	}
}
