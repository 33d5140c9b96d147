package skills

import (
	"bytes"
	"regexp"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Manifest is the YAML front matter of a skill's SKILL.md.
type Manifest struct {
	// Name is lowercase letters, digits and single hyphens, at most 64.
	Name string `json:"name" yaml:"name"`
	// Description says what the skill does and when to use it (at most
	// 1024 characters).
	Description  string            `json:"description" yaml:"description"`
	License      string            `json:"license,omitempty" yaml:"license"`
	AllowedTools []string          `json:"allowed_tools,omitempty" yaml:"allowed-tools"`
	Metadata     map[string]string `json:"metadata,omitempty" yaml:"metadata"`
	// Network is the hosts (host or host:port) its scripts must reach,
	// from metadata "network" (comma-separated). Empty: none.
	Network []string `json:"network,omitempty" yaml:"-"`
}

// NetworkKey is the metadata key where a skill declares the hosts its
// scripts reach.
const NetworkKey = "network"

var skillNameRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// ValidName reports whether s is a valid skill name.
func ValidName(s string) bool { return len(s) <= 64 && skillNameRE.MatchString(s) }

// ParseManifest reads SKILL.md: "---", YAML front matter, "---", then
// the instructions.
func ParseManifest(md []byte) (Manifest, error) {
	var m Manifest
	if !utf8.Valid(md) {
		return m, invalid("skill_manifest_invalid", "SKILL.md is not UTF-8")
	}
	md = bytes.TrimPrefix(md, []byte("\xef\xbb\xbf"))
	text := strings.ReplaceAll(string(md), "\r\n", "\n")
	rest, ok := strings.CutPrefix(text, "---\n")
	if !ok {
		return m, invalid("skill_manifest_invalid", "SKILL.md must begin with YAML front matter between --- lines")
	}
	front, _, ok := strings.Cut(rest, "\n---")
	if !ok {
		return m, invalid("skill_manifest_invalid", "SKILL.md's front matter has no closing --- line")
	}
	var raw struct {
		Name         string         `yaml:"name"`
		Description  string         `yaml:"description"`
		License      string         `yaml:"license"`
		AllowedTools any            `yaml:"allowed-tools"`
		Metadata     map[string]any `yaml:"metadata"`
	}
	if err := yaml.Unmarshal([]byte(front), &raw); err != nil {
		return m, invalid("skill_manifest_invalid", "SKILL.md's front matter is not valid YAML: %v", err)
	}
	m.Name, m.Description, m.License = strings.TrimSpace(raw.Name), strings.TrimSpace(raw.Description), raw.License
	switch {
	case m.Name == "":
		return m, invalid("skill_manifest_invalid", "SKILL.md's front matter has no name")
	case !ValidName(m.Name):
		return m, invalid("skill_manifest_invalid", "skill name %q must be lowercase letters, digits and single hyphens, at most 64", m.Name)
	case m.Description == "":
		return m, invalid("skill_manifest_invalid", "SKILL.md's front matter has no description")
	case utf8.RuneCountInString(m.Description) > 1024:
		return m, invalid("skill_manifest_invalid", "the description is over 1024 characters")
	}
	switch t := raw.AllowedTools.(type) {
	case nil:
	case string:
		m.AllowedTools = strings.Fields(strings.ReplaceAll(t, ",", " "))
	case []any:
		for _, v := range t {
			s, ok := v.(string)
			if !ok {
				return m, invalid("skill_manifest_invalid", "allowed-tools must be strings")
			}
			m.AllowedTools = append(m.AllowedTools, s)
		}
	default:
		return m, invalid("skill_manifest_invalid", "allowed-tools must be a string or a list of strings")
	}
	if len(raw.Metadata) > 0 {
		m.Metadata = make(map[string]string, len(raw.Metadata))
		for k, v := range raw.Metadata {
			switch v.(type) {
			case string, int, float64, bool:
			default:
				return m, invalid("skill_manifest_invalid", "metadata %q must be a string", k)
			}
			m.Metadata[k] = strings.TrimSpace(yamlScalar(v))
		}
	}
	for _, h := range strings.Split(m.Metadata[NetworkKey], ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if strings.ContainsAny(h, "/ \t*") {
			return m, invalid("skill_manifest_invalid", "metadata network entry %q must be a host or host:port", h)
		}
		m.Network = append(m.Network, h)
	}
	return m, nil
}

func yamlScalar(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := yaml.Marshal(v)
	return strings.TrimSpace(string(b))
}
