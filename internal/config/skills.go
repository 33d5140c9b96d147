package config

import (
	"genesis.dev/sandbox/internal/sandbox"
)

// Skills configures skills (POST /v1/skills) and their runs.
type Skills struct {
	// Profile is the profile a run's sandbox uses (default
	// skill-python-basic); a profile the config lacks fails each run with
	// profile_not_found, not the service's start.
	Profile string `yaml:"profile"`
	// MaxRiskLevel is the ceiling: a run whose risk is above it is refused
	// (default high). A tenant's upload is risk medium: runsc.
	MaxRiskLevel sandbox.RiskLevel `yaml:"max_risk_level"`
	// AllowNetwork lets a skill that declares hosts (metadata network in
	// SKILL.md) reach exactly those; without it such a skill's runs are
	// refused. A skill that declares none never has a network.
	AllowNetwork bool `yaml:"allow_network"`
	// MaxArchiveBytes, MaxTotalBytes and MaxFiles bound one skill archive
	// (defaults 8 MiB compressed, 32 MiB of files, 1000 files).
	MaxArchiveBytes int64 `yaml:"max_archive_bytes"`
	MaxTotalBytes   int64 `yaml:"max_total_bytes"`
	MaxFiles        int   `yaml:"max_files"`
}

func (c *Config) validateSkills(v *problems) {
	bad := v.add
	s := c.Skills
	if r := s.MaxRiskLevel; r != "" && r.Rank() < 0 {
		bad("skills.max_risk_level", "unknown risk level %q", r)
	}
	if s.MaxArchiveBytes < 0 || s.MaxTotalBytes < 0 || s.MaxFiles < 0 {
		bad("skills", "max_archive_bytes, max_total_bytes and max_files must not be negative")
	}
}
