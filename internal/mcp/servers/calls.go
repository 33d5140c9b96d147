package servers

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/mcp"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/trace"
)

func (m *Manager) record(in *instance, rec mcp.CallRecord) {
	in.mu.Lock()
	rec.Secrets = in.view.Secrets
	in.seq++
	in.calls = append(in.calls, CallEntry{Seq: in.seq, CallRecord: rec})
	if len(in.calls) > callRing {
		in.calls = slices.Delete(in.calls, 0, len(in.calls)-callRing)
	}
	tenant, id, sandboxID := in.view.Tenant, in.view.ID, in.view.SandboxID
	in.mu.Unlock()
	m.traceCall(tenant, id, sandboxID, rec)
	if m.cfg.Audit == nil {
		return
	}
	select {
	case m.audits <- auditItem{tenant, id, rec}:
	default:
		m.log.Error("the MCP audit queue is full; a call record is only in the instance's call log", "instance", id, "tool", rec.Tool)
	}
}

// traceCall records a tool call in the trace of the instance's sandbox.
func (m *Manager) traceCall(tenant, instance, sandboxID string, rec mcp.CallRecord) {
	if m.cfg.Trace == nil || rec.Method != "tools/call" || sandboxID == "" {
		return
	}
	b, err := json.Marshal(map[string]any{"instance": instance, "session": rec.Session, "tool": rec.Tool,
		"args_digest": rec.ArgsDigest, "args_bytes": rec.ArgsBytes, "decision": rec.Decision, "rule": rec.Rule,
		"outcome": rec.Outcome, "error": rec.Error, "duration_ms": rec.DurationMS, "result_bytes": rec.ResultBytes})
	if err != nil {
		return
	}
	m.cfg.Trace.Record(m.ctx, tenant, sandboxID, trace.Event{Actor: trace.ActorAgent, Kind: trace.KindMCPToolCall, Data: b})
}

// auditor writes call records to the audit log off the call's path.
func (m *Manager) auditor() {
	defer m.wg.Done()
	for {
		select {
		case a := <-m.audits:
			m.cfg.Audit(a.tenant, a.instance, a.rec)
		case <-m.ctx.Done():
			for {
				select {
				case a := <-m.audits:
					m.cfg.Audit(a.tenant, a.instance, a.rec)
				default:
					return
				}
			}
		}
	}
}

// Calls are an instance's call records after cursor (a seq), oldest
// first, at most limit; next is the cursor of the next page ("" at the end).
func (m *Manager) Calls(ctx context.Context, tenant, id string, cursor int64, limit int) (recs []CallEntry, next string, err error) {
	in, err := m.get(tenant, id)
	if err != nil {
		return nil, "", err
	}
	if limit <= 0 || limit > callRing {
		limit = 100
	}
	in.mu.Lock()
	for _, c := range in.calls {
		if c.Seq <= cursor {
			continue
		}
		if len(recs) == limit {
			next = strconv.FormatInt(recs[len(recs)-1].Seq, 10)
			break
		}
		recs = append(recs, c)
	}
	sandboxID, network := in.view.SandboxID, in.view.Network
	in.mu.Unlock()
	if len(recs) > 0 && network != "" && network != "none" && m.cfg.NetworkEvents != nil {
		if err := m.joinEgress(ctx, tenant, sandboxID, recs); err != nil {
			return nil, "", err
		}
	}
	return recs, next, nil
}

// maxEgressJoin bounds the events read to join one page of calls.
const maxEgressJoin = 10000

// joinEgress gives each call the sandbox's egress events made in its
// window. An event's time is when the sandbox made the attempt; an allowed
// connection is recorded only when it ends, which may be after the call
// answered, so its event joins the call that opened it. Events are listed
// in the order they were recorded: the scan stops after a page whose last
// event was recorded (made, plus open for) after the window.
func (m *Manager) joinEgress(ctx context.Context, tenant, sandboxID string, recs []CallEntry) error {
	from := recs[0].Time
	to := from
	for _, r := range recs {
		if end := r.Time.Add(time.Duration(r.DurationMS+1) * time.Millisecond); end.After(to) {
			to = end
		}
	}
	var cursor int64
	for read := 0; read < maxEgressJoin; {
		evs, next, err := m.cfg.NetworkEvents(ctx, tenant, sandboxID, cursor, 1000)
		if errors.Is(err, errdefs.ErrNotFound) {
			return nil // the sandbox is gone and its events with it
		}
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.Time.Before(from) || ev.Time.After(to) {
				continue
			}
			for i := range recs {
				end := recs[i].Time.Add(time.Duration(recs[i].DurationMS+1) * time.Millisecond)
				if !ev.Time.Before(recs[i].Time) && !ev.Time.After(end) {
					recs[i].Egress = append(recs[i].Egress, ev)
				}
			}
		}
		if len(evs) == 0 || next == cursor || recordedAt(evs[len(evs)-1]).After(to) {
			return nil
		}
		cursor, read = next, read+len(evs)
	}
	return nil
}

// recordedAt is when the gateway recorded ev: once it was made, or for an
// allowed connection, once it ended.
func recordedAt(ev sandbox.NetworkEvent) time.Time {
	return ev.Time.Add(time.Duration(ev.DurationMS) * time.Millisecond)
}

// Tools lists an instance's tools as its clients see them.
func (m *Manager) Tools(ctx context.Context, tenant, id string) ([]*sdk.Tool, error) {
	in, err := m.get(tenant, id)
	if err != nil {
		return nil, err
	}
	in.mu.Lock()
	p := in.proxy
	state := in.view.State
	in.mu.Unlock()
	if p == nil {
		return nil, errdefs.WithCode("mcp_server_not_ready", fmt.Errorf("MCP server %s is %s: %w", id, state, errdefs.ErrUnavailable))
	}
	return p.Tools(ctx)
}

// Pins are an instance's tool pins.
func (m *Manager) Pins(tenant, id string) ([]mcp.Pin, error) {
	in, err := m.get(tenant, id)
	if err != nil {
		return nil, err
	}
	return in.policy.Pins(), nil
}

// ApprovePin approves the changed definition of a tool (by its hash).
func (m *Manager) ApprovePin(tenant, id, tool, hash, keyID string) (mcp.Pin, error) {
	in, err := m.get(tenant, id)
	if err != nil {
		return mcp.Pin{}, err
	}
	if err := in.approvableBy(keyID); err != nil {
		return mcp.Pin{}, err
	}
	if hash == "" {
		return mcp.Pin{}, invalid("hash is required: the hash of the changed definition being approved (GET …/pins)")
	}
	return in.policy.Approve(tool, hash)
}

// ServeMCP serves an instance's Streamable HTTP endpoint. The caller is
// authenticated by the instance's own bearer token, never a tenant key;
// the token is not passed to the server.
func (m *Manager) ServeMCP(w http.ResponseWriter, r *http.Request, id string, fail func(http.ResponseWriter, *http.Request, error)) {
	m.mu.Lock()
	in := m.insts[id]
	m.mu.Unlock()
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if in == nil || !ok {
		// an unknown instance and a missing token answer alike
		w.Header().Set("WWW-Authenticate", `Bearer realm="genesis-mcp"`)
		fail(w, r, errdefs.WithCode("mcp_token_invalid", fmt.Errorf("this endpoint takes the instance's bearer token: %w", errdefs.ErrUnauthenticated)))
		return
	}
	h := sha256.Sum256([]byte(tok))
	if subtle.ConstantTimeCompare(h[:], in.tokenHash[:]) != 1 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="genesis-mcp", error="invalid_token"`)
		fail(w, r, errdefs.WithCode("mcp_token_invalid", fmt.Errorf("this endpoint takes the instance's bearer token: %w", errdefs.ErrUnauthenticated)))
		return
	}
	in.mu.Lock()
	handler, state, why := in.handler, in.view.State, in.view.LastError
	in.view.LastUsedAt = m.cfg.Now().UTC()
	in.mu.Unlock()
	if handler == nil {
		if state == StateRestarting || state == StateStarting {
			w.Header().Set("Retry-After", "1")
		}
		fail(w, r, errdefs.WithCode("mcp_server_not_ready", fmt.Errorf("MCP server %s is %s %s: %w", id, state, why, errdefs.ErrUnavailable)))
		return
	}
	r.Header.Del("Authorization")
	handler.ServeHTTP(w, r)
}
