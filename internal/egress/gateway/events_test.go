package gateway

import (
	"testing"
	"time"

	"genesis.dev/sandbox/internal/egress"
)

func TestRingPagesAndDrops(t *testing.T) {
	t.Parallel()
	r := newRing(4, func() time.Time { return time.UnixMicro(100) })
	if p := r.since(0, 10); len(p.Events) != 0 || p.Next != 0 {
		t.Fatalf("empty ring: %+v", p)
	}
	for i := range 6 {
		r.add(egress.Event{Name: string(rune('a' + i))})
	}
	// Seqs are 101..106; 101 and 102 were dropped.
	p := r.since(0, 10)
	if p.Lost != 2 || len(p.Events) != 4 || p.Events[0].Seq != 103 || p.Next != 106 || p.Events[0].Name != "c" {
		t.Fatalf("after overflow: %+v", p)
	}
	if p := r.since(101, 10); p.Lost != 1 || p.Events[0].Seq != 103 {
		t.Fatalf("lost since 101: %+v", p)
	}
	if p := r.since(103, 2); len(p.Events) != 2 || p.Events[0].Seq != 104 || p.Next != 105 || p.Lost != 0 {
		t.Fatalf("paged: %+v", p)
	}
	if p := r.since(106, 10); len(p.Events) != 0 || p.Next != 106 {
		t.Fatalf("caught up: %+v", p)
	}
	if p := r.since(999, 10); p.Next != 106 {
		t.Fatalf("cursor never issued must rewind to the last seq: %+v", p)
	}
	if r.dropped.Load() != 2 || !r.since(105, 1).Events[0].Time.Equal(time.UnixMicro(100)) {
		t.Fatalf("dropped %d", r.dropped.Load())
	}
	// A restarted gateway numbers above the old one's cursor.
	r2 := newRing(4, func() time.Time { return time.UnixMicro(200) })
	r2.add(egress.Event{})
	if p := r2.since(106, 10); len(p.Events) != 1 || p.Events[0].Seq != 201 || p.Lost != 0 {
		t.Fatalf("after restart: %+v", p)
	}
}
