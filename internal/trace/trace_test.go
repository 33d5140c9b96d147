package trace_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/trace"
)

func open(t *testing.T, dir string, now func() time.Time) *trace.Store {
	t.Helper()
	s, err := trace.Open(trace.Config{Dir: dir, Retention: time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func note(i int) trace.Event {
	return trace.Event{Actor: trace.ActorAgent, Kind: "annotation", Data: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i))}
}

func dataI(t *testing.T, e trace.Event) int {
	t.Helper()
	var d struct{ I int }
	if err := json.Unmarshal(e.Data, &d); err != nil {
		t.Fatal(err)
	}
	return d.I
}

// TestResumeFromEveryCursor reads the trace after every seq, in pages of
// every size, and checks each read continues exactly after its cursor.
func TestResumeFromEveryCursor(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir(), nil)
	ctx := context.Background()
	const n = 40
	for i := 1; i <= n; i++ {
		e, err := s.Append(ctx, "t1", "sb1", note(i))
		if err != nil {
			t.Fatal(err)
		}
		if e.Seq != int64(i) {
			t.Fatalf("append %d got seq %d", i, e.Seq)
		}
	}
	for after := int64(0); after <= n; after++ {
		for _, limit := range []int{1, 3, 7, 1000} {
			evs, _, err := s.Read("t1", "sb1", after, limit)
			if err != nil {
				t.Fatal(err)
			}
			want := min(int64(limit), n-after)
			if int64(len(evs)) != want {
				t.Fatalf("after %d limit %d: %d events, want %d", after, limit, len(evs), want)
			}
			for k, e := range evs {
				if e.Seq != after+int64(k)+1 || dataI(t, e) != int(e.Seq) {
					t.Fatalf("after %d: event %d has seq %d data %d", after, k, e.Seq, dataI(t, e))
				}
			}
		}
	}
	for _, bad := range []int64{-1, n + 1} {
		if _, _, err := s.Read("t1", "sb1", bad, 10); !errors.Is(err, errdefs.ErrInvalidArgument) || errdefs.Code(err) != "invalid_cursor" {
			t.Fatalf("cursor %d: %v, want invalid_cursor", bad, err)
		}
	}
}

// TestRandomDisconnectReader follows a trace being written by several
// producers, dropping its "connection" at random points and resuming from
// the last seq it saw: it must see every event once, in order.
func TestRandomDisconnectReader(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir(), nil)
	ctx := context.Background()
	const writers, per = 4, 300
	if _, err := s.Append(ctx, "t1", "sb", note(0)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				if _, err := s.Append(ctx, "t1", "sb", note(w*per+i+1)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[int]bool{}
	cursor := int64(0)
	deadline := time.After(20 * time.Second)
	for len(seen) < writers*per+1 {
		// One "connection": read pages until a random number of events
		// have been taken, then drop it and resume from cursor.
		budget := 1 + rng.IntN(50)
		for budget > 0 {
			evs, changed, err := s.Read("t1", "sb", cursor, 1+rng.IntN(20))
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) == 0 {
				if len(seen) == writers*per+1 {
					break
				}
				select {
				case <-changed:
				case <-deadline:
					t.Fatalf("stalled at cursor %d with %d seen", cursor, len(seen))
				}
				continue
			}
			for _, e := range evs {
				if e.Seq != cursor+1 {
					t.Fatalf("gap or duplicate: seq %d after cursor %d", e.Seq, cursor)
				}
				i := dataI(t, e)
				if seen[i] {
					t.Fatalf("event %d seen twice", i)
				}
				seen[i] = true
				cursor = e.Seq
				budget--
			}
		}
	}
	wg.Wait()
}

// TestReopenCutsTornTail reopens a trace whose last line was torn by a
// crash: the whole events stay, the torn one is gone, seqs go on.
func TestReopenCutsTornTail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s := open(t, dir, nil)
	for i := 1; i <= 3; i++ {
		if _, err := s.Append(ctx, "t1", "sb", note(i)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "sb@*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("trace files of sb: %v", files)
	}
	f, err := os.OpenFile(files[0], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"seq":4,"time":"2026-`)
	f.Close()
	s2 := open(t, dir, nil)
	if last, err := s2.Last("t1", "sb"); err != nil || last != 3 {
		t.Fatalf("last after reopen = %d, %v; want 3", last, err)
	}
	e, err := s2.Append(ctx, "t1", "sb", note(4))
	if err != nil || e.Seq != 4 {
		t.Fatalf("append after reopen: seq %d, %v", e.Seq, err)
	}
	evs, _, err := s2.Read("t1", "sb", 0, 100)
	if err != nil || len(evs) != 4 || dataI(t, evs[3]) != 4 {
		t.Fatalf("read after reopen: %d events, %v", len(evs), err)
	}
}

// TestTenantScoped: another tenant's read of a trace is not found, as is a
// sandbox without a trace.
func TestTenantScoped(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir(), nil)
	if _, err := s.Append(context.Background(), "t1", "sb", note(1)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ tenant, id string }{{"t2", "sb"}, {"t1", "other"}, {"t1", "../sb"}} {
		if _, _, err := s.Read(c.tenant, c.id, 0, 10); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("read %s/%s: %v, want not found", c.tenant, c.id, err)
		}
	}
	// A sandbox held by one tenant after another (a pool) has a trace per
	// tenant: the next holder's events start a trace of its own, and
	// neither sees the other's; nobody's events are not kept.
	if e, err := s.Append(context.Background(), "t2", "sb", note(2)); err != nil || e.Seq != 1 {
		t.Fatalf("append by the next holder: %+v %v, want seq 1 of its own trace", e, err)
	}
	s.Record(context.Background(), "", "sb", note(3))
	for tenant, want := range map[string]string{"t1": "1", "t2": "2"} {
		evs, _, err := s.Read(tenant, "sb", 0, 10)
		if err != nil || len(evs) != 1 || fmt.Sprint(dataI(t, evs[0])) != want {
			t.Fatalf("%s's trace of sb: %+v %v, want its one event %s", tenant, evs, err, want)
		}
	}
	if _, _, err := s.Read("", "sb", 0, 10); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("nobody's trace: %v, want not found", err)
	}
}

// TestBadEvents: a bad actor, empty kind, non-object or oversized data is
// refused and appends nothing.
func TestBadEvents(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir(), nil)
	ctx := context.Background()
	if _, err := s.Append(ctx, "t1", "sb", note(1)); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, trace.MaxDataBytes+1)
	for i := range big {
		big[i] = ' '
	}
	big[0], big[len(big)-1] = '{', '}'
	for _, e := range []trace.Event{
		{Actor: "robot", Kind: "annotation"},
		{Actor: "human:", Kind: "annotation"},
		{Actor: "human:<b>ann</b>", Kind: "annotation"},
		{Actor: trace.ActorAPI, Kind: ""},
		{Actor: trace.ActorAPI, Kind: "annotation", Data: json.RawMessage(`[1]`)},
		{Actor: trace.ActorAPI, Kind: "annotation", Data: json.RawMessage(`{`)},
		{Actor: trace.ActorAPI, Kind: "annotation", Data: big},
	} {
		if _, err := s.Append(ctx, "t1", "sb", e); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Fatalf("append %+v: %v, want invalid argument", e.Actor+"/"+string(e.Kind), err)
		}
	}
	if last, _ := s.Last("t1", "sb"); last != 1 {
		t.Fatalf("bad appends changed the trace: last %d", last)
	}
}

// TestSweepAfterRetention: an ended trace is kept for the retention and
// removed after it; a live one is never removed.
func TestSweepAfterRetention(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s := open(t, t.TempDir(), clock)
	ctx := context.Background()
	for _, id := range []string{"ended", "live"} {
		if _, err := s.Append(ctx, "t1", id, note(1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.End("ended"); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Expire(now.Add(59 * time.Minute)); err != nil || n != 0 {
		t.Fatalf("sweep within retention removed %d, %v", n, err)
	}
	if n, err := s.Expire(now.Add(61 * time.Minute)); err != nil || n != 1 {
		t.Fatalf("sweep after retention removed %d, %v; want 1", n, err)
	}
	if _, _, err := s.Read("t1", "ended", 0, 1); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("swept trace read: %v", err)
	}
	if _, _, err := s.Read("t1", "live", 0, 1); err != nil {
		t.Fatalf("live trace: %v", err)
	}
}

func TestValidHumanName(t *testing.T) {
	t.Parallel()
	for who, want := range map[string]bool{
		"ann": true, "Ana Lima": true, "ana.lima+x@example.com": false, "ana.lima@example.com": true, "ops:on-call_2": true,
		"José": true, "李雷": true, "٣": true, strings.Repeat("é", 64): true,
		"": false, " ann": false, "ann ": false, strings.Repeat("x", 65): false,
		"<b>": false, "a&b": false, `a"b`: false, "a'b": false, "a/b": false, "a=b": false, "a(b)": false,
		"a\nb": false, "a\tb": false, "a\x00b": false, "a\u202eb": false, "a\u200bb": false, "a\u0301": false, "\xff": false,
	} {
		if got := trace.ValidHumanName(who); got != want {
			t.Errorf("ValidHumanName(%q) = %v, want %v", who, got, want)
		}
		if got := trace.ValidActor("human:" + who); got != want {
			t.Errorf("ValidActor(human:%q) = %v, want %v", who, got, want)
		}
	}
}
