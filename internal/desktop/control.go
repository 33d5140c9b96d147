package desktop

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/trace"
)

// CodeControlHeld answers an agent action while a human holds control.
const CodeControlHeld = "control_held"

// Holders of a desktop's control.
const (
	HolderNone     = ""
	HolderAgent    = "agent"
	holderHumanPfx = "human:"
)

// maxRequests bounds the open requests for a human kept per sandbox.
const maxRequests = 16

// lease is one sandbox's control state; changed is closed and replaced on
// every change.
type lease struct {
	st      api.DesktopControl
	changed chan struct{}
	// view is the live-view connection whose input took control; the
	// lease is released when it closes.
	view *VNCSession
}

// control keeps the leases of every desktop sandbox in memory (a service
// restart releases them all).
type controlLeases struct {
	mu     sync.Mutex
	leases map[string]*lease
}

func (c *controlLeases) get(id string, now time.Time) *lease {
	l := c.leases[id]
	if l == nil {
		l = &lease{st: api.DesktopControl{SandboxID: id, Since: now, Requests: []api.DesktopControlRequest{}}, changed: make(chan struct{})}
		c.leases[id] = l
	}
	return l
}

func (l *lease) bump() {
	l.st.Version++
	close(l.changed)
	l.changed = make(chan struct{})
}

// snapshot is a copy of the lease's state as the API shows it (times in
// UTC).
func (l *lease) snapshot() api.DesktopControl {
	s := l.st
	s.Since = s.Since.UTC()
	s.Requests = append([]api.DesktopControlRequest{}, l.st.Requests...)
	for i := range s.Requests {
		s.Requests[i].At = s.Requests[i].At.UTC()
	}
	return s
}

// humanHolds reports whether a human holds the lease.
func humanHolds(holder string) bool { return strings.HasPrefix(holder, holderHumanPfx) }

func validHolder(h string) error {
	if h == HolderAgent {
		return nil
	}
	who, ok := strings.CutPrefix(h, holderHumanPfx)
	if !ok || !trace.ValidHumanName(who) {
		return bad("invalid_holder", "holder %.80q must be agent or human:<who>, who %s", h, trace.HumanNameRule)
	}
	return nil
}

// checkAgent answers whether the agent may run a batch now: never while a
// human holds control, except a batch that only looks when the human
// allows screenshots.
func (c *controlLeases) checkAgent(id string, onlyLooks bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.leases[id]
	if l == nil || !humanHolds(l.st.Holder) {
		return nil
	}
	if onlyLooks && l.st.AllowScreenshots {
		return nil
	}
	what := "input"
	if onlyLooks {
		what = "screenshots (the holder does not allow them)"
	}
	return errdefs.WithCode(CodeControlHeld, errdefs.Mark(fmt.Errorf("%s holds control of sandbox %s since %s (%s): agent %s refused; wait for the release (control version %d)",
		l.st.Holder, id, l.st.Since.UTC().Format(time.RFC3339), l.st.Reason, what, l.st.Version), errdefs.ErrConflict))
}

// CheckDesktop checks that id is a caller's running desktop sandbox (the
// errors of the desktop routes) and returns its id.
func (m *Manager) CheckDesktop(ctx context.Context, tenant, id string) (string, error) {
	return m.desktopID(ctx, tenant, id)
}

// desktopID checks that id is a caller's running desktop sandbox.
func (m *Manager) desktopID(ctx context.Context, tenant, id string) (string, error) {
	t, err := m.cfg.Sandboxes.AttachDesktop(ctx, tenant, id)
	if err != nil {
		return "", err
	}
	t.Release()
	return t.SandboxID, nil
}

// Control reports who holds a desktop sandbox's control. With after >= 0
// it waits (up to wait) until the version is past after.
func (m *Manager) Control(ctx context.Context, tenant, id string, after int64, wait time.Duration) (*api.DesktopControl, error) {
	sandboxID, err := m.desktopID(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		m.ctl.mu.Lock()
		l := m.ctl.get(sandboxID, time.Now())
		st, ch := l.snapshot(), l.changed
		m.ctl.mu.Unlock()
		if after < 0 || st.Version > after {
			return &st, nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return &st, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// change runs f on the lease of a caller's desktop sandbox under the
// lock; f reports whether it changed the lease (which wakes the waiters).
func (m *Manager) change(ctx context.Context, tenant, id string, f func(l *lease, now time.Time) (bool, error)) (*api.DesktopControl, error) {
	sandboxID, err := m.desktopID(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	m.ctl.mu.Lock()
	defer m.ctl.mu.Unlock()
	l := m.ctl.get(sandboxID, now)
	changed, err := f(l, now)
	if err != nil {
		return nil, err
	}
	if changed {
		l.bump()
	}
	st := l.snapshot()
	return &st, nil
}

// api.TakeDesktopControlRequest makes req.Holder the holder: a human takes control from
// anyone at once (a takeover); the agent takes it only from nobody or
// itself (409 control_held while a human holds it).
func (m *Manager) TakeControl(ctx context.Context, tenant, id string, req api.TakeDesktopControlRequest) (*api.DesktopControl, error) {
	if err := validHolder(req.Holder); err != nil {
		return nil, err
	}
	if len(req.Reason) > 1024 {
		return nil, bad("invalid_argument", "reason is longer than 1024 bytes")
	}
	var prev string
	st, err := m.change(ctx, tenant, id, func(l *lease, now time.Time) (bool, error) {
		prev = l.st.Holder
		if req.Holder == HolderAgent && humanHolds(l.st.Holder) {
			return false, errdefs.WithCode(CodeControlHeld, fmt.Errorf("%s holds control of sandbox %s: %w", l.st.Holder, id, errdefs.ErrConflict))
		}
		if l.st.Holder != req.Holder {
			l.st.Since = now
		}
		l.view = nil
		l.st.Holder, l.st.Reason, l.st.AllowScreenshots = req.Holder, req.Reason, req.AllowScreenshots
		if humanHolds(req.Holder) {
			l.st.Requests = l.st.Requests[:0] // a human came: the requests are answered
		}
		return true, nil
	})
	if err == nil && prev != req.Holder {
		m.recordControl(ctx, tenant, st, req.Holder, trace.KindControlTaken, map[string]any{"holder": req.Holder, "previous": prev, "reason": req.Reason, "allow_screenshots": req.AllowScreenshots})
	}
	return st, err
}

// recordControl records a change of a desktop's control in its trace.
func (m *Manager) recordControl(ctx context.Context, tenant string, st *api.DesktopControl, actor string, kind trace.Kind, d map[string]any) {
	d["version"] = st.Version
	recordTo(ctx, m.cfg.Trace, tenant, st.SandboxID, actor, kind, d)
}

// ReleaseControl gives control back to nobody (the agent may act again);
// waiters on GET …/control?after= see the change. It is idempotent.
func (m *Manager) ReleaseControl(ctx context.Context, tenant, id string) (*api.DesktopControl, error) {
	var prev string
	st, err := m.change(ctx, tenant, id, func(l *lease, now time.Time) (bool, error) {
		prev = l.st.Holder
		if l.st.Holder == HolderNone {
			return false, nil
		}
		l.st.Holder, l.st.Reason, l.st.AllowScreenshots, l.st.Since = HolderNone, "", false, now
		l.view = nil
		return true, nil
	})
	if err == nil && prev != HolderNone {
		// The agent side reads this (or GET …/control?after=N) as its cue
		// to look again: the display may have changed.
		m.recordControl(ctx, tenant, st, trace.ActorAPI, trace.KindControlReleased, map[string]any{"previous": prev})
	}
	return st, err
}

// RequestHuman records an agent's request for a human, visible in the
// control state (and so to viewers); the oldest is dropped past 16.
func (m *Manager) RequestHuman(ctx context.Context, tenant, id, reason string) (*api.DesktopControl, error) {
	if reason == "" || len(reason) > 1024 {
		return nil, bad("invalid_argument", "reason must be 1..1024 bytes")
	}
	st, err := m.change(ctx, tenant, id, func(l *lease, now time.Time) (bool, error) {
		l.st.Requests = append(l.st.Requests, api.DesktopControlRequest{Reason: reason, At: now.UTC()})
		if len(l.st.Requests) > maxRequests {
			l.st.Requests = l.st.Requests[len(l.st.Requests)-maxRequests:]
		}
		return true, nil
	})
	if err == nil {
		m.recordControl(ctx, tenant, st, trace.ActorAgent, trace.KindControlRequested, map[string]any{"reason": reason})
	}
	return st, err
}

// dropControl forgets a sandbox's lease, waking its waiters.
func (m *Manager) dropControl(id string) {
	m.ctl.mu.Lock()
	defer m.ctl.mu.Unlock()
	if l := m.ctl.leases[id]; l != nil {
		close(l.changed)
		delete(m.ctl.leases, id)
	}
}

// joinView makes the person at a controller's live view the control
// lease's holder: their first input is a takeover, so the agent's next
// action answers 409 control_held. A human who took control through the
// API keeps it; one whose view took it passes it to this view (the pen
// moved here).
func (m *Manager) joinView(v *VNCSession) {
	holder := holderHumanPfx + v.Who
	now := time.Now()
	m.ctl.mu.Lock()
	l := m.ctl.get(v.SandboxID, now)
	if l.view == v || (humanHolds(l.st.Holder) && l.view == nil) {
		m.ctl.mu.Unlock()
		return
	}
	if l.view != nil && l.st.Holder == holder { // the same person's other view took the pen
		l.view = v
		m.ctl.mu.Unlock()
		return
	}
	prev := l.st.Holder
	l.st.Holder, l.st.Reason, l.st.AllowScreenshots, l.st.Since = holder, "took over in the live view", false, now
	l.st.Requests = l.st.Requests[:0]
	l.view = v
	l.bump()
	st := l.snapshot()
	m.ctl.mu.Unlock()
	m.recordControl(context.Background(), v.tenant, &st, holder, trace.KindControlTaken,
		map[string]any{"holder": holder, "previous": prev, "reason": st.Reason, "via": "live_view"})
}

// leaveView releases the control a live view's input took, when it
// closes (the person left; the agent may act again).
func (m *Manager) leaveView(v *VNCSession) {
	m.ctl.mu.Lock()
	l := m.ctl.leases[v.SandboxID]
	if l == nil || l.view != v {
		m.ctl.mu.Unlock()
		return
	}
	prev := l.st.Holder
	l.st.Holder, l.st.Reason, l.st.AllowScreenshots, l.st.Since = HolderNone, "", false, time.Now()
	l.view = nil
	l.bump()
	st := l.snapshot()
	m.ctl.mu.Unlock()
	m.recordControl(context.Background(), v.tenant, &st, prev, trace.KindControlReleased, map[string]any{"previous": prev, "via": "live_view"})
}
