package admission

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAcquireRelease measures one grant and release: uncontended (the
// fast path) and with every goroutine of the run contending for 4 slots
// across 8 tenants (queueing and round robin).
func BenchmarkAcquireRelease(b *testing.B) {
	b.Run("free", func(b *testing.B) {
		ctl, err := New(Config{Capacity: Capacity{CPU: 1e6, MemoryMB: 1 << 40, Sandboxes: 1 << 30}})
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			rel, err := ctl.Acquire(context.Background(), "t", cpus(1), 0)
			if err != nil {
				b.Fatal(err)
			}
			rel()
		}
	})
	b.Run("contended", func(b *testing.B) {
		ctl, err := New(Config{Capacity: Capacity{CPU: 4, MemoryMB: 1 << 40, Sandboxes: 4}})
		if err != nil {
			b.Fatal(err)
		}
		b.SetParallelism(16)
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			tenant := fmt.Sprintf("t%d", n.Add(1)%8)
			for pb.Next() {
				rel, err := ctl.Acquire(context.Background(), tenant, cpus(1), time.Minute)
				if err != nil {
					b.Error(err)
					return
				}
				rel()
			}
		})
	})
}
