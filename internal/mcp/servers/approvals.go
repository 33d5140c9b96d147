package servers

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/mcp"
	"genesis.dev/sandbox/internal/sandbox"
)

// Approval states.
const (
	ApprovalPending   = "pending"
	ApprovalApproved  = "approved"
	ApprovalDenied    = "denied"
	ApprovalExpired   = "expired"
	ApprovalAbandoned = "abandoned" // the client went away first
)

// DefaultApprovalTTL is how long a held call waits for its decision.
const DefaultApprovalTTL = 5 * time.Minute

// approvalRing is how many approvals an instance keeps.
const approvalRing = 200

// Approval is a call held for a person's decision, bound to exactly that
// call: its instance, tool and argument digest, until it expires.
type Approval struct {
	ID         string          `json:"id"`
	Instance   string          `json:"instance"`
	Tool       string          `json:"tool"`
	Arguments  json.RawMessage `json:"arguments,omitempty"`
	ArgsDigest string          `json:"args_digest"`
	Session    string          `json:"session,omitempty"`
	Client     string          `json:"client,omitempty"`
	State      string          `json:"state"`
	CreatedAt  time.Time       `json:"created_at"`
	ExpiresAt  time.Time       `json:"expires_at"`
	DecidedAt  *time.Time      `json:"decided_at,omitempty"`
	DecidedBy  string          `json:"decided_by,omitempty"`
	Reason     string          `json:"reason,omitempty"`

	done chan struct{}
}

// approver holds an instance's calls for approval.
type approver struct {
	m   *Manager
	in  *instance
	ttl time.Duration
}

// Approve implements mcp.Approver.
func (a approver) Approve(ctx context.Context, req mcp.ApprovalRequest) (string, error) {
	now := a.m.cfg.Now().UTC()
	ap := &Approval{ID: sandbox.NewID("apr"), Instance: a.in.view.ID, Tool: req.Tool, Arguments: req.Args, ArgsDigest: req.ArgsDigest,
		Session: req.Session, Client: req.Client, State: ApprovalPending, CreatedAt: now, ExpiresAt: now.Add(a.ttl), done: make(chan struct{})}
	if ap.ArgsDigest == "" {
		ap.ArgsDigest = "none"
	}
	a.in.mu.Lock()
	a.in.approvals = append(a.in.approvals, ap)
	if len(a.in.approvals) > approvalRing {
		a.in.approvals = slices.DeleteFunc(a.in.approvals, func(x *Approval) bool { return x.State != ApprovalPending })
	}
	a.in.mu.Unlock()
	timer := time.NewTimer(a.ttl)
	defer timer.Stop()
	end := func(state, why string) {
		a.in.mu.Lock()
		if ap.State == ApprovalPending {
			ap.State, ap.Reason = state, why
		}
		a.in.mu.Unlock()
	}
	select {
	case <-ap.done:
	case <-timer.C:
		end(ApprovalExpired, "no decision within "+a.ttl.String())
	case <-ctx.Done():
		end(ApprovalAbandoned, "the call ended first: "+ctx.Err().Error())
	}
	a.in.mu.Lock()
	defer a.in.mu.Unlock()
	switch ap.State {
	case ApprovalApproved:
		return ap.DecidedBy, nil
	case ApprovalDenied:
		msg := fmt.Sprintf("the call of %q was denied by %s (approval %s)", ap.Tool, ap.DecidedBy, ap.ID)
		if ap.Reason != "" {
			msg += ": " + ap.Reason
		}
		return "", fmt.Errorf("%s: %w", msg, errdefs.ErrPermissionDenied)
	default:
		return "", fmt.Errorf("the call of %q was not approved (approval %s %s: %s): %w", ap.Tool, ap.ID, ap.State, ap.Reason, errdefs.ErrDeadlineExceeded)
	}
}

// Approvals lists an instance's held calls, pending first, newest first.
func (m *Manager) Approvals(tenant, id string) ([]Approval, error) {
	in, err := m.get(tenant, id)
	if err != nil {
		return nil, err
	}
	in.mu.Lock()
	out := make([]Approval, 0, len(in.approvals))
	for _, ap := range in.approvals {
		c := *ap
		c.done = nil
		out = append(out, c)
	}
	in.mu.Unlock()
	slices.SortStableFunc(out, func(a, b Approval) int {
		if (a.State == ApprovalPending) != (b.State == ApprovalPending) {
			if a.State == ApprovalPending {
				return -1
			}
			return 1
		}
		return b.CreatedAt.Compare(a.CreatedAt)
	})
	return out, nil
}

// CodeApproverIsCreator answers a decision (or pin approval) by the key
// that started the instance.
const CodeApproverIsCreator = "approver_is_creator"

// approvableBy refuses the key that started the instance: the calls it
// would approve are its own agent's.
func (in *instance) approvableBy(keyID string) error {
	in.mu.Lock()
	creator, id := in.view.CreatedBy, in.view.ID
	in.mu.Unlock()
	if keyID == "" || keyID == creator {
		return errdefs.WithCode(CodeApproverIsCreator, fmt.Errorf(
			"key %s started MCP server %s and may not approve its calls or changed tools; use another key with the scope approve: %w",
			keyID, id, errdefs.ErrPermissionDenied))
	}
	return nil
}

// ApprovalDecision is a decision on a held call.
type ApprovalDecision struct {
	// Decision is approve or deny.
	Decision string
	// ArgsDigest must be the call's argument digest, so that a decision
	// is for exactly the call reviewed.
	ArgsDigest string
	Reason     string
	// KeyID is the deciding API key (never the instance's creator); By
	// names it in the record.
	KeyID, By string
}

// Decide approves or denies a held call.
func (m *Manager) Decide(tenant, id, approvalID string, d ApprovalDecision) (*Approval, error) {
	in, err := m.get(tenant, id)
	if err != nil {
		return nil, err
	}
	if err := in.approvableBy(d.KeyID); err != nil {
		return nil, err
	}
	decision, argsDigest, by, reason := d.Decision, d.ArgsDigest, d.By, d.Reason
	var state string
	switch decision {
	case "approve":
		state = ApprovalApproved
	case "deny":
		state = ApprovalDenied
	default:
		return nil, invalid("decision must be approve or deny, got %q", decision)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	i := slices.IndexFunc(in.approvals, func(a *Approval) bool { return a.ID == approvalID })
	if i < 0 {
		return nil, errdefs.WithCode("approval_not_found", fmt.Errorf("no approval %s of MCP server %s: %w", approvalID, id, errdefs.ErrNotFound))
	}
	ap := in.approvals[i]
	switch {
	case ap.State != ApprovalPending:
		return nil, errdefs.WithCode("approval_not_pending", fmt.Errorf("approval %s is %s: %w", ap.ID, ap.State, errdefs.ErrConflict))
	case argsDigest != ap.ArgsDigest:
		return nil, errdefs.WithCode("approval_digest_mismatch", fmt.Errorf(
			"approval %s is for arguments %s, not %s: %w", ap.ID, ap.ArgsDigest, argsDigest, errdefs.ErrConflict))
	}
	now := m.cfg.Now().UTC()
	ap.State, ap.DecidedAt, ap.DecidedBy, ap.Reason = state, &now, by, reason
	close(ap.done)
	c := *ap
	c.done = nil
	return &c, nil
}
