package config

import "time"

// DesktopSpec makes a profile a desktop profile: its sandboxes run an X
// display (a profile service) that the computer actions API drives. The X
// server listens on TCP 6000+Display and its VNC server on 5900+Display,
// both on the sandbox's loopback only; the service reaches them through
// the agent's port dial.
type DesktopSpec struct {
	// Display is the X display number (:N).
	Display int `yaml:"display"`
	// Width and Height are the display's real size in pixels.
	Width  int `yaml:"width"`
	Height int `yaml:"height"`
	// ActionTimeout bounds one batch of actions.
	ActionTimeout time.Duration `yaml:"action_timeout"`
	// MaxActions bounds the actions of one request.
	MaxActions int `yaml:"max_actions"`
}

// XPort is the X server's TCP port inside the sandbox.
func (d DesktopSpec) XPort() int { return 6000 + d.Display }

// VNCPort is the VNC (RFB) server's TCP port inside the sandbox.
func (d DesktopSpec) VNCPort() int { return 5900 + d.Display }

// validateDesktop checks the desktop key of every profile that has one.
func (c *Config) validateDesktop(v *problems) {
	for i := range c.Profiles {
		p := &c.Profiles[i]
		d := p.Desktop
		if d == nil {
			continue
		}
		key := "profiles." + p.Name + ".desktop"
		if d.Display < 0 || d.Display > 63 {
			v.add(key+".display", "%d is not a display number 0..63", d.Display)
		} else if p.Ports.Allows(d.XPort()) || p.Ports.Allows(d.VNCPort()) {
			// The desktop routes dial these ports themselves; through the
			// generic port proxy they would bypass the live view's roles.
			v.add(key+".display", "the profile's ports policy allows the X port %d or the VNC port %d; leave both out of ports.allow", d.XPort(), d.VNCPort())
		}
		if d.Width < 64 || d.Height < 64 || d.Width > 7680 || d.Height > 4320 {
			v.add(key+".width", "%dx%d is not a display size between 64x64 and 7680x4320", d.Width, d.Height)
		}
		if d.ActionTimeout <= 0 {
			v.add(key+".action_timeout", "must be positive, got %v", d.ActionTimeout)
		}
		if d.MaxActions < 1 {
			v.add(key+".max_actions", "must be at least 1, got %d", d.MaxActions)
		}
	}
}
