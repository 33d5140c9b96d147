package control

import "genesis.dev/sandbox/internal/config"

// ProfileConfig returns the configured profile name, if any.
func (s *Service) ProfileConfig(name string) (*config.Profile, bool) {
	return s.cfg.Profile(name)
}
