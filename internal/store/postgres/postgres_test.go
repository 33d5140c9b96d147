package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/store/pgtest"
	"genesis.dev/sandbox/internal/store/postgres"
	"genesis.dev/sandbox/internal/store/sqlstore"
	"genesis.dev/sandbox/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// testMaxConns keeps the pools of parallel tests within the test cluster's
// max_connections.
const testMaxConns = 4

func open(t testing.TB, dsn string) *sqlstore.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), postgres.Config{DSN: dsn, MaxConns: testMaxConns})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// rawConn connects behind the store's back, as an operator would.
func rawConn(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("pgx.Connect: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, pgtest.Start(t))
	})
}

func TestInvalidValues(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.Start(t))
	defer s.Close()
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		sb   *sandbox.Sandbox
	}{
		{"time before 1677", &sandbox.Sandbox{ID: "sbx_old", CreatedAt: time.Time{}, UpdatedAt: now}},
		{"time after 2262", &sandbox.Sandbox{ID: "sbx_late", CreatedAt: now, UpdatedAt: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{"NUL in text", &sandbox.Sandbox{ID: "sbx_nul", Image: "a\x00b", CreatedAt: now, UpdatedAt: now}},
		{"NUL in JSON", &sandbox.Sandbox{ID: "sbx_nuljson", Env: map[string]string{"K": "a\x00b"}, CreatedAt: now, UpdatedAt: now}},
		{"invalid UTF-8", &sandbox.Sandbox{ID: "sbx_utf8", Profile: "\xff\xfe", CreatedAt: now, UpdatedAt: now}},
	}
	for _, tc := range tests {
		err := s.CreateSandbox(t.Context(), tc.sb)
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("%s: CreateSandbox error = %v, want class ErrInvalidArgument", tc.name, err)
		}
	}
}

// TestRowLockWaitDeadline: a deadline that expires while an update waits
// for a row lock held by another transaction is ErrDeadlineExceeded, and fn
// never runs without the lock.
func TestRowLockWaitDeadline(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Start(t)
	s := open(t, dsn)
	defer s.Close()

	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := s.CreateSandbox(t.Context(), &sandbox.Sandbox{ID: "sbx_locked", CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	holder := rawConn(t, dsn)
	tx, err := holder.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), "SELECT 1 FROM sandboxes WHERE id = 'sbx_locked' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer wcancel()
	called := false
	_, err = s.UpdateSandbox(wctx, "sbx_locked", 0, now, func(*sandbox.Sandbox) error { called = true; return nil })
	if !errors.Is(err, errdefs.ErrDeadlineExceeded) {
		t.Errorf("UpdateSandbox waiting for a locked row past its deadline: err = %v, want class ErrDeadlineExceeded", err)
	}
	if called {
		t.Error("UpdateSandbox called fn without the row lock")
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  postgres.Config
		want error
	}{
		{"empty DSN", postgres.Config{}, errdefs.ErrInvalidArgument},
		{"bad DSN", postgres.Config{DSN: "postgres://host:notaport/db"}, errdefs.ErrInvalidArgument},
		{"negative MaxConns", postgres.Config{DSN: "postgres://127.0.0.1/db", MaxConns: -1}, errdefs.ErrInvalidArgument},
		// Port 1 on loopback: nothing listens there.
		{"unreachable", postgres.Config{DSN: "postgres://postgres@127.0.0.1:1/db?sslmode=disable&connect_timeout=5"}, errdefs.ErrUnavailable},
	}
	for _, tc := range tests {
		s, err := postgres.Open(t.Context(), tc.cfg)
		if err == nil {
			s.Close()
			t.Errorf("%s: Open succeeded, want class %v", tc.name, tc.want)
			continue
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Open error = %v, want class %v", tc.name, err, tc.want)
		}
	}
}

// TestSessionLocks: a lock one process holds is refused to another until
// it is released, or until the holder's connection dies — then Lost says
// so and the other may take it.
func TestSessionLocks(t *testing.T) {
	dsn := pgtest.Start(t)
	a, b := open(t, dsn), open(t, dsn)
	ctx := t.Context()
	la, ok, err := a.TryLock(ctx, "leader")
	if err != nil || !ok {
		t.Fatalf("a.TryLock = %v, %v; want held", ok, err)
	}
	if _, ok, err := b.TryLock(ctx, "leader"); err != nil || ok {
		t.Fatalf("b.TryLock of a held lock = %v, %v; want refused", ok, err)
	}
	if lb, ok, err := b.TryLock(ctx, "other"); err != nil || !ok {
		t.Fatalf("b.TryLock(other) = %v, %v; want held", ok, err)
	} else {
		lb.Release()
	}
	la.Release()
	lb, ok, err := b.TryLock(ctx, "leader")
	if err != nil || !ok {
		t.Fatalf("b.TryLock after release = %v, %v; want held", ok, err)
	}
	// The holder's session ends (a crashed process): its lock is lost.
	if _, err := rawConn(t, dsn).Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lb.Lost():
	case <-time.After(15 * time.Second):
		t.Fatal("Lost not closed after the holder's session was terminated")
	}
	if la, ok, err := a.TryLock(ctx, "leader"); err != nil || !ok {
		t.Fatalf("a.TryLock after the holder died = %v, %v; want held", ok, err)
	} else {
		la.Release()
	}
}

// TestWaitLocks: Lock waits while another store holds the lock and takes it
// once released; an ended context ends the wait and frees its slot; no more
// than sqlstore.WaitLockSlots are held at once by one store.
func TestWaitLocks(t *testing.T) {
	dsn := pgtest.Start(t)
	a, b := open(t, dsn), open(t, dsn)
	ctx := t.Context()
	la, err := a.Lock(ctx, "quota:x")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan store.Lock)
	go func() {
		lb, err := b.Lock(ctx, "quota:x")
		if err != nil {
			t.Error(err)
		}
		got <- lb
	}()
	select {
	case <-got:
		t.Fatal("b took a lock a holds")
	case <-time.After(300 * time.Millisecond):
	}
	la.Release()
	select {
	case lb := <-got:
		lb.Release()
	case <-time.After(15 * time.Second):
		t.Fatal("b did not get the lock a released")
	}

	// A wait that is given up ends with its context's error, holding nothing.
	la, err = a.Lock(ctx, "quota:y")
	if err != nil {
		t.Fatal(err)
	}
	for range sqlstore.WaitLockSlots + 1 { // each gives its slot back
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, err := b.Lock(cctx, "quota:y")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("b.Lock of a held lock with a deadline = %v; want the deadline", err)
		}
	}
	// A context that ends before the wait starts (here: already ended; on
	// a loaded machine: while a new connection is dialled) ends it with its
	// error too, wherever it finds the call.
	ended, cancel := context.WithDeadline(ctx, time.Now())
	defer cancel()
	for range 20 {
		if _, err := b.Lock(ended, "quota:y"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("b.Lock with an ended context = %v; want the deadline", err)
		}
	}
	if _, _, err := b.TryLock(ended, "quota:z"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("b.TryLock with an ended context = %v; want the deadline", err)
	}
	la.Release()

	// A store holds WaitLockSlots at once; one more waits for a slot.
	var held []store.Lock
	for i := range sqlstore.WaitLockSlots {
		l, err := a.Lock(ctx, fmt.Sprintf("slot:%d", i))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = a.Lock(cctx, "slot:free")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock beyond the slots = %v; want a wait for a slot", err)
	}
	held[0].Release()
	l, err := a.Lock(ctx, "slot:free")
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	for _, l := range held[1:] {
		l.Release()
	}
}

// TestLiveInstances: the owners of live sandboxes, each once; the owners
// of only destroyed or failed ones are not listed; TakeSandbox moves one
// live sandbox and refuses one its from-instance does not own.
func TestLiveInstances(t *testing.T) {
	st := open(t, pgtest.Start(t))
	ctx := t.Context()
	now := time.Now().UTC()
	mk := func(id, instance string, state sandbox.State) {
		t.Helper()
		sb := &sandbox.Sandbox{ID: id, Tenant: "a", Profile: "p", Runtime: sandbox.RuntimeRunc, RiskLevel: sandbox.RiskLow,
			State: state, Image: "img", Instance: instance, CreatedAt: now, UpdatedAt: now}
		if err := st.CreateSandbox(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	mk("sbx_1", "i1", sandbox.StateReady)
	mk("sbx_2", "i1", sandbox.StateLeased)
	mk("sbx_3", "i2", sandbox.StateDestroyed)
	mk("sbx_4", "i3", sandbox.StateFailed)
	mk("sbx_5", "i4", sandbox.StateDraining)
	got, err := st.LiveInstances(ctx)
	if err != nil || fmt.Sprint(got) != "[i1 i4]" {
		t.Fatalf("LiveInstances = %v, %v; want [i1 i4]", got, err)
	}
	if err := st.TakeSandbox(ctx, "sbx_5", "i4", "i1", now); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.LiveInstances(ctx); fmt.Sprint(got) != "[i1]" {
		t.Errorf("LiveInstances after the take = %v; want [i1]", got)
	}
	if err := st.TakeSandbox(ctx, "sbx_5", "i4", "i2", now); !errors.Is(err, errdefs.ErrPreconditionFailed) {
		t.Errorf("TakeSandbox from an instance that no longer owns it = %v; want precondition failed", err)
	}
	if err := st.TakeSandbox(ctx, "sbx_3", "i2", "i1", now); !errors.Is(err, errdefs.ErrPreconditionFailed) {
		t.Errorf("TakeSandbox of a destroyed sandbox = %v; want precondition failed", err)
	}
}

// BenchmarkQuotaLock is what counting a tenant's quota across instances
// adds to a create or claim of a tenant with quotas: the store lock
// (Lock, Release) and, for a cold lease, a lease hold (HoldLease, then
// the claim's delete, here DropLeaseHold), beside the in-process mutex
// that was all before.
func BenchmarkQuotaLock(b *testing.B) {
	st := open(b, pgtest.Start(b))
	ctx := context.Background()
	b.Run("mutex", func(b *testing.B) {
		var mu sync.Mutex
		for b.Loop() {
			mu.Lock()
			mu.Unlock() //lint:ignore SA2001 the cost of the lock is what is measured
		}
	})
	b.Run("store-lock", func(b *testing.B) {
		for b.Loop() {
			l, err := st.Lock(ctx, "quota:bench")
			if err != nil {
				b.Fatal(err)
			}
			l.Release()
		}
	})
	b.Run("lease-hold", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			id := fmt.Sprint("hold_", i)
			if err := st.HoldLease(ctx, store.LeaseHold{ID: id, Tenant: "a", Instance: "i", ExpiresAt: time.Now().Add(time.Minute)}); err != nil {
				b.Fatal(err)
			}
			if err := st.DropLeaseHold(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
	})
}
