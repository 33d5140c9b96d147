package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"genesis.dev/sandbox/api"
	"genesis.dev/sandbox/internal/recording"
	"genesis.dev/sandbox/internal/trace"
)

// redacted reports whether an action's text goes into the trace as a
// count: the action says sensitive, or it fills or types into a password
// field (its selector's element, or the focused one for type without a
// selector). A page that cannot be asked is taken as a password field: a
// secret is never recorded by mistake.
func (s *session) redacted(ctx context.Context, a api.BrowserAction) bool {
	if a.Sensitive {
		return true
	}
	if a.Text == "" || !actions[a.Type].types {
		return false
	}
	tc, ok := s.tabs[s.active]
	if !ok {
		return true
	}
	expr := `(document.activeElement && document.activeElement.type === "password")`
	if a.Selector != "" {
		expr = `(() => { const e = document.querySelector(` + jsString(a.Selector) + `); return !!e && e.type === "password"; })()`
	}
	pw, err := withDeadline(ctx, tc.ctx, func(c context.Context) (bool, error) {
		c, cancel := context.WithTimeout(c, 2*time.Second)
		defer cancel()
		return chromedp.Run(c, chromedp.Evaluate[bool](expr))
	})
	return err != nil || pw
}

// traceStarted records that action i starts, with its arguments; the text
// of a redacted action is its length in characters.
func (m *Manager) traceStarted(ctx context.Context, t *Target, i int, a api.BrowserAction, redact bool) {
	if m.cfg.Trace == nil {
		return
	}
	args := a
	args.Files = append([]string(nil), a.Files...)
	d := map[string]any{"index": i, "type": a.Type}
	if redact {
		d["redacted"] = true
		d["text_chars"] = utf8.RuneCountInString(a.Text)
		args.Text, args.Value, args.Expression = "", "", ""
	}
	d["args"] = args
	m.record(ctx, t, trace.ActorAgent, trace.KindBrowserActionStarted, d)
}

// traceFinished records how action r ended: duration, result or error,
// and the artifact of a kept screenshot.
func (m *Manager) traceFinished(ctx context.Context, t *Target, r ActionResult) {
	if m.cfg.Trace == nil {
		return
	}
	d := map[string]any{"index": r.Index, "type": r.Type, "ok": r.OK, "duration_ms": r.Ms}
	if r.Error != "" {
		d["error"] = r.Error
	}
	if r.Artifact != nil {
		d["artifact"] = map[string]any{"id": r.Artifact.ID, "sha256": r.Artifact.SHA256, "size": r.Artifact.Size, "mime": r.Artifact.MIME}
	}
	if actions[r.Type].loads {
		d["value"] = r.Value
	}
	m.record(ctx, t, trace.ActorSystem, trace.KindBrowserActionFinished, d)
}

// traceNavigation records the active tab's page when it changed.
func (m *Manager) traceNavigation(ctx context.Context, t *Target, s *session, out *ActionsResult) {
	if m.cfg.Trace == nil || out.URL == "" || out.URL == s.lastURL {
		return
	}
	s.lastURL = out.URL
	m.record(ctx, t, trace.ActorSystem, trace.KindBrowserNavigation, map[string]any{"url": out.URL, "title": out.Title, "tab": out.Tab})
}

func (m *Manager) record(ctx context.Context, t *Target, actor string, kind trace.Kind, d map[string]any) {
	b, err := json.Marshal(d)
	if err != nil {
		return
	}
	if len(b) > trace.MaxDataBytes { // a huge expression or text: keep the event
		delete(d, "args")
		d["args_dropped"] = true
		if b, err = json.Marshal(d); err != nil {
			return
		}
	}
	m.cfg.Trace.Record(context.WithoutCancel(ctx), t.Tenant, t.SandboxID, trace.Event{Actor: actor, Kind: kind, Data: b})
}

// maxKeepers bounds the trace screenshots being kept at once; an action
// waits for a slot rather than let captures pile up in memory.
const maxKeepers = 2

// shotPhases is when an action gets trace screenshots.
type shotPhases struct{ before, after bool }

// shotsFor reports the trace screenshots action a gets: the actions that
// change or move about the page, as the screenshot mode asks.
func (m *Manager) shotsFor(a api.BrowserAction) shotPhases {
	if m.cfg.Trace == nil || m.cfg.Artifacts == nil {
		return shotPhases{}
	}
	if !actions[a.Type].changes {
		return shotPhases{}
	}
	return shotPhases{recording.WantShot(m.cfg.Screenshots, "before"), recording.WantShot(m.cfg.Screenshots, "after")}
}

// shotOf is what a trace screenshot taken now captures: the active tab,
// and the point the current action pressed.
type shotOf struct {
	tab target.ID
	tc  tabCtx
	ok  bool // there is an active tab
	pt  *point
}

// shotOf is the session's active tab and point, for traceShot (which
// may run after the session has moved on).
func (s *session) shotOf() shotOf {
	tc, ok := s.tabs[s.active]
	return shotOf{tab: s.active, tc: tc, ok: ok, pt: s.point}
}

// traceShot captures the viewport of of's tab now and keeps it, with a
// thumbnail, in the background; browser.screenshot names both, the action
// and the point it pressed (in the image's pixels: headless Chromium
// draws one pixel per CSS pixel). A failed capture is recorded as such;
// the action is not failed by it. It reads nothing of the session, so it
// may run without the session's lock.
func (m *Manager) traceShot(ctx context.Context, t *Target, of shotOf, i int, a api.BrowserAction, phase string) {
	ev := map[string]any{"index": i, "type": a.Type, "phase": phase}
	if of.pt != nil {
		ev["physical"] = map[string]int{"x": int(of.pt.X), "y": int(of.pt.Y)}
	}
	if !of.ok {
		return // no page yet: nothing to show
	}
	tc := of.tc
	ev["tab"] = string(of.tab)
	img, err := withDeadline(ctx, tc.ctx, func(c context.Context) ([]byte, error) {
		c, cancel := context.WithTimeout(c, 5*time.Second)
		defer cancel()
		fast := true
		res, err := chromedp.Call(c, page.CaptureScreenshot, page.CaptureScreenshotParams{Format: page.CaptureScreenshotFormatPng, OptimizeForSpeed: &fast})
		if err != nil {
			return nil, err
		}
		return res.Data, nil
	})
	if err != nil {
		ev["error"] = err.Error()
		m.record(ctx, t, trace.ActorSystem, trace.KindBrowserScreenshot, ev)
		return
	}
	m.encoders <- struct{}{}
	go func() {
		defer func() { <-m.encoders }()
		ctx := context.WithoutCancel(ctx)
		name := fmt.Sprintf("browser-%d-%d-%s", time.Now().UnixMilli(), i, phase)
		shot, err := recording.KeepEncoded(ctx, m.cfg.Artifacts, t.Tenant, t.SandboxID, name, img)
		if err != nil {
			ev["error"] = err.Error()
		} else {
			ev["size"] = map[string]int{"width": shot.Size.X, "height": shot.Size.Y}
			ev["artifact"] = recording.Ref(shot.Full)
			if shot.Thumb != nil {
				ev["thumbnail"] = recording.Ref(shot.Thumb)
			}
		}
		m.record(ctx, t, trace.ActorSystem, trace.KindBrowserScreenshot, ev)
	}()
}
