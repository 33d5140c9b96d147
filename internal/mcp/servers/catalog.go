package servers

import (
	"fmt"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/mcp"
)

// Entry is a catalogued server: where its code comes from, how to start
// it, what it declares it needs, and its tool rules and pins.
type Entry struct {
	Name        string            `json:"name" yaml:"name"`
	Description string            `json:"description,omitempty" yaml:"description"`
	Source      Source            `json:"source" yaml:"source"`
	Profile     string            `json:"profile,omitempty" yaml:"profile"`
	Command     []string          `json:"command" yaml:"command"`
	Cwd         string            `json:"cwd,omitempty" yaml:"cwd"`
	Env         map[string]string `json:"env,omitempty" yaml:"env"`
	Permissions Permissions       `json:"permissions" yaml:"permissions"`
	Tools       mcp.Rules         `json:"tools" yaml:"tools"`
	// Pins are known-good tool definitions (a changed one is a rug pull
	// from the first tools/list on).
	Pins []mcp.Pin `json:"pins,omitempty" yaml:"pins"`
}

// Validate checks an entry.
func (e Entry) Validate() error {
	if len(e.Command) == 0 || e.Command[0] == "" {
		return fmt.Errorf("command is required: %w", errdefs.ErrInvalidArgument)
	}
	if _, ok := sourceRisk[e.Source]; !ok {
		return fmt.Errorf("unknown source %q (builtin, verified, registry, unverified, ad-hoc): %w", e.Source, errdefs.ErrInvalidArgument)
	}
	if err := e.Permissions.Validate(); err != nil {
		return err
	}
	return e.Tools.Validate()
}
