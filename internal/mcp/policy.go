package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/internal/errdefs"
)

// Rules are a server's tool allow and deny lists: path.Match patterns
// against tool names. An empty Allow allows every tool Deny does not name.
type Rules struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
	// Approve names the tools each call of which waits for a person's
	// decision bound to exactly that call (tool and argument digest).
	Approve []string `json:"approve,omitempty"`
}

// Validate checks the patterns.
func (r Rules) Validate() error {
	for _, p := range slices.Concat(r.Allow, r.Deny, r.Approve) {
		if p == "" {
			return errdefs.Invalid("an empty tool pattern")
		}
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("tool pattern %q: %v: %w", p, err, errdefs.ErrInvalidArgument)
		}
	}
	return nil
}

// Visible reports whether the rules let a client see and call tool, and the
// rule that decided.
func (r Rules) Visible(tool string) (bool, string) {
	for _, p := range r.Deny {
		if ok, _ := path.Match(p, tool); ok {
			return false, "deny " + p
		}
	}
	if len(r.Allow) == 0 {
		return true, "allow (no allow list)"
	}
	for _, p := range r.Allow {
		if ok, _ := path.Match(p, tool); ok {
			return true, "allow " + p
		}
	}
	return false, "not in the allow list"
}

// NeedsApproval reports whether each call of tool waits for an approval.
func (r Rules) NeedsApproval(tool string) bool {
	for _, p := range r.Approve {
		if ok, _ := path.Match(p, tool); ok {
			return true
		}
	}
	return false
}

// PinMode is what a tool definition that changed since it was pinned does.
type PinMode string

const (
	// PinWarn lists the changed definition and records the change.
	PinWarn PinMode = "warn"
	// PinBlock hides the changed tool and refuses its calls until the
	// change is approved.
	PinBlock PinMode = "block"
)

// Pin is the hash of a tool's definition (name, title, description,
// schemas, annotations) as first listed, or as approved since.
type Pin struct {
	Tool       string          `json:"tool"`
	Hash       string          `json:"hash"`
	PinnedAt   time.Time       `json:"pinned_at"`
	Definition json.RawMessage `json:"definition"`
	// Changed is the backend's current, different definition, if any.
	Changed *PinChange `json:"changed,omitempty"`
}

// PinChange is a definition that differs from the pin.
type PinChange struct {
	Hash       string          `json:"hash"`
	SeenAt     time.Time       `json:"seen_at"`
	Definition json.RawMessage `json:"definition"`
	// Blocked is true when the tool is hidden and refused until approved.
	Blocked bool `json:"blocked"`
}

// Policy is one server's tool policy: rules, pins and input validation.
// It is safe for concurrent use.
type Policy struct {
	rules Rules
	mode  PinMode
	now   func() time.Time

	mu      sync.Mutex
	pins    map[string]*Pin
	schemas map[string]*jsonschema.Resolved // by definition hash
	// OnChange, if set, is called (outside the lock) when a pin changes
	// state: first pinned, changed, approved.
	onChange func(Pin)
}

// NewPolicy makes a policy. pins are pins already held (from the catalog
// or a previous run); mode is PinBlock unless PinWarn.
func NewPolicy(rules Rules, mode PinMode, pins []Pin, now func() time.Time, onChange func(Pin)) (*Policy, error) {
	if err := rules.Validate(); err != nil {
		return nil, err
	}
	if mode != PinWarn {
		mode = PinBlock
	}
	if now == nil {
		now = time.Now
	}
	p := &Policy{rules: rules, mode: mode, now: now, pins: map[string]*Pin{}, schemas: map[string]*jsonschema.Resolved{}, onChange: onChange}
	for _, pin := range pins {
		pin := pin
		p.pins[pin.Tool] = &pin
	}
	return p, nil
}

// Rules are the policy's rules.
func (p *Policy) Rules() Rules { return p.rules }

// Mode is the policy's pin mode.
func (p *Policy) Mode() PinMode { return p.mode }

// ToolHash is the canonical hash of a tool's definition: SHA-256 over the
// JSON of name, title, description, inputSchema, outputSchema and
// annotations with object keys sorted.
func ToolHash(t *sdk.Tool) (string, json.RawMessage, error) {
	def := map[string]any{"name": t.Name}
	add := func(k string, v any) error {
		if v == nil {
			return nil
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var generic any
		if err := json.Unmarshal(b, &generic); err != nil {
			return err
		}
		if generic != nil && generic != "" {
			def[k] = generic
		}
		return nil
	}
	for k, v := range map[string]any{"title": t.Title, "description": t.Description, "inputSchema": t.InputSchema,
		"outputSchema": t.OutputSchema, "annotations": t.Annotations} {
		if err := add(k, v); err != nil {
			return "", nil, fmt.Errorf("tool %q: %v: %w", t.Name, err, ErrProtocol)
		}
	}
	canon, err := json.Marshal(def) // map keys are sorted, at every depth
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), canon, nil
}

// Filter applies the policy to a backend's tools/list page: hidden tools
// are dropped; each listed tool is pinned on first sight; a tool whose
// definition differs from its pin is recorded and, in block mode, dropped.
func (p *Policy) Filter(tools []*sdk.Tool) []*sdk.Tool {
	var shown []*sdk.Tool
	var changed []Pin
	p.mu.Lock()
	for _, t := range tools {
		if t == nil {
			continue
		}
		if ok, _ := p.rules.Visible(t.Name); !ok {
			continue
		}
		hash, def, err := ToolHash(t)
		if err != nil {
			continue // a definition that cannot be hashed is not shown
		}
		pin := p.pins[t.Name]
		switch {
		case pin == nil:
			pin = &Pin{Tool: t.Name, Hash: hash, PinnedAt: p.now(), Definition: def}
			p.pins[t.Name] = pin
			changed = append(changed, *pin)
		case pin.Hash == hash:
			if pin.Changed != nil { // changed back to what was pinned
				pin.Changed = nil
				changed = append(changed, *pin)
			}
		default:
			if pin.Changed == nil || pin.Changed.Hash != hash {
				pin.Changed = &PinChange{Hash: hash, SeenAt: p.now(), Definition: def, Blocked: p.mode == PinBlock}
				changed = append(changed, *pin)
			}
			if p.mode == PinBlock {
				continue
			}
		}
		p.noteSchema(hash, t.InputSchema)
		shown = append(shown, t)
	}
	p.mu.Unlock()
	if p.onChange != nil {
		for _, c := range changed {
			p.onChange(c)
		}
	}
	return shown
}

func (p *Policy) noteSchema(hash string, schema any) {
	if _, ok := p.schemas[hash]; ok || schema == nil {
		return
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		p.schemas[hash] = nil
		return
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		rs = nil // a schema the validator cannot use is not enforced
	}
	p.schemas[hash] = rs
}

// ErrToolChanged is the class of a call to a tool whose definition changed
// since it was pinned, in block mode.
var ErrToolChanged = errdefs.WithCode("tool_changed", errdefs.ErrFailedPrecondition)

// Decision is the policy's answer to one tools/call.
type Decision struct {
	// Allowed is false when the call is refused.
	Allowed bool
	// Rule is the rule that decided, in words.
	Rule string
	// Hidden is true when the tool is not visible: the call must be
	// answered exactly as a call to a tool that does not exist.
	Hidden bool
	// Err is why an allowed-looking tool is refused (changed pin, bad
	// arguments): a message for the client.
	Err error
	// NeedsApproval is true when the allowed call must wait for an
	// approval first.
	NeedsApproval bool
}

// Check decides a call of tool with args. The tool must have been seen in
// a tools/list (known reports whether it was); a call of a tool never
// listed is answered as a missing tool.
func (p *Policy) Check(tool string, args json.RawMessage) Decision {
	if ok, rule := p.rules.Visible(tool); !ok {
		return Decision{Rule: rule, Hidden: true}
	}
	p.mu.Lock()
	pin := p.pins[tool]
	var rs *jsonschema.Resolved
	if pin != nil {
		h := pin.Hash
		if pin.Changed != nil {
			h = pin.Changed.Hash
		}
		rs = p.schemas[h]
	}
	p.mu.Unlock()
	if pin == nil {
		return Decision{Rule: "not listed by the server", Hidden: true}
	}
	if pin.Changed != nil && pin.Changed.Blocked {
		return Decision{Rule: "pin changed", Err: fmt.Errorf(
			"tool %q changed its definition since it was pinned (%s, now %s); it is blocked until its change is approved: %w",
			tool, pin.Hash, pin.Changed.Hash, ErrToolChanged)}
	}
	if rs != nil {
		var v any = map[string]any{}
		if len(args) > 0 && string(args) != "null" {
			if err := json.Unmarshal(args, &v); err != nil {
				return Decision{Rule: "input schema", Err: errdefs.Invalid("arguments of %q are not JSON", tool)}
			}
		}
		if err := rs.Validate(v); err != nil {
			return Decision{Rule: "input schema", Err: errdefs.Invalid("arguments of %q do not match its inputSchema: %v", tool, err)}
		}
	}
	rule := "allowed"
	if pin.Changed != nil {
		rule = "allowed (pin changed; warn mode)"
	}
	return Decision{Allowed: true, Rule: rule, NeedsApproval: p.rules.NeedsApproval(tool)}
}

// Pins are the policy's pins, by tool name.
func (p *Policy) Pins() []Pin {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Pin, 0, len(p.pins))
	for _, pin := range p.pins {
		c := *pin
		if pin.Changed != nil {
			ch := *pin.Changed
			c.Changed = &ch
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tool < out[j].Tool })
	return out
}

// Approve makes tool's changed definition its pin. hash must be the
// changed definition's hash, so an approval is bound to exactly the
// definition that was reviewed.
func (p *Policy) Approve(tool, hash string) (Pin, error) {
	p.mu.Lock()
	pin := p.pins[tool]
	if pin == nil {
		p.mu.Unlock()
		return Pin{}, errdefs.WithCode("pin_not_found", fmt.Errorf("no pin of tool %q: %w", tool, errdefs.ErrNotFound))
	}
	if pin.Changed == nil {
		p.mu.Unlock()
		return Pin{}, errdefs.WithCode("pin_unchanged", fmt.Errorf("tool %q has not changed since it was pinned: %w", tool, errdefs.ErrConflict))
	}
	if pin.Changed.Hash != hash {
		p.mu.Unlock()
		return Pin{}, errdefs.WithCode("pin_hash_mismatch", fmt.Errorf(
			"tool %q's changed definition is %s, not %s: %w", tool, pin.Changed.Hash, hash, errdefs.ErrConflict))
	}
	pin.Hash, pin.Definition, pin.PinnedAt, pin.Changed = pin.Changed.Hash, pin.Changed.Definition, p.now(), nil
	out := *pin
	p.mu.Unlock()
	if p.onChange != nil {
		p.onChange(out)
	}
	return out, nil
}
