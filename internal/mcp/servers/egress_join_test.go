package servers

import (
	"context"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/mcp"
	"genesis.dev/sandbox/internal/sandbox"
)

// TestJoinEgress: a call gets the events made in its window, including a
// connection it opened that the gateway recorded only after the call had
// answered; events made outside every window join no call.
func TestJoinEgress(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// In the order the gateway recorded them.
	evs := []sandbox.NetworkEvent{
		{Cursor: 1, Time: at(-50), Name: "before.test", Proto: "dns", Decision: "allow"},
		{Cursor: 2, Time: at(5), Name: "denied.test", Proto: "dns", Decision: "deny"},
		{Cursor: 3, Time: at(10), DurationMS: 400, Name: "first.test", Proto: "http", Decision: "allow"}, // outlived call 1
		{Cursor: 4, Time: at(1010), DurationMS: 20, Name: "second.test", Proto: "http", Decision: "allow"},
		{Cursor: 5, Time: at(5000), Name: "after.test", Proto: "dns", Decision: "allow"},
	}
	m := &Manager{cfg: Config{NetworkEvents: func(_ context.Context, _, _ string, cursor int64, limit int) ([]sandbox.NetworkEvent, int64, error) {
		var page []sandbox.NetworkEvent
		for _, e := range evs {
			if e.Cursor > cursor && len(page) < limit {
				page = append(page, e)
			}
		}
		if len(page) == 0 {
			return nil, cursor, nil
		}
		return page, page[len(page)-1].Cursor, nil
	}}}
	recs := []CallEntry{
		{Seq: 1, CallRecord: mcp.CallRecord{Time: at(0), DurationMS: 100}},
		{Seq: 2, CallRecord: mcp.CallRecord{Time: at(1000), DurationMS: 100}},
	}
	if err := m.joinEgress(context.Background(), "t", "sb", recs); err != nil {
		t.Fatal(err)
	}
	names := func(r CallEntry) (out []string) {
		for _, e := range r.Egress {
			out = append(out, e.Name)
		}
		return out
	}
	if got := names(recs[0]); len(got) != 2 || got[0] != "denied.test" || got[1] != "first.test" {
		t.Errorf("call 1 egress %v; want [denied.test first.test]", got)
	}
	if got := names(recs[1]); len(got) != 1 || got[0] != "second.test" {
		t.Errorf("call 2 egress %v; want [second.test]", got)
	}
}
