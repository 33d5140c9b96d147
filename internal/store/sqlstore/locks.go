package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sync"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/store"
)

var _ store.Locker = (*Store)(nil)

// lockCheckEvery is how often a held lock's connection is checked.
const lockCheckEvery = 2 * time.Second

// TryLock takes a PostgreSQL session advisory lock on its own connection,
// held until Release or until that connection breaks. SQLite, a store of
// one process, has none (errdefs.ErrNotImplemented).
func (s *Store) TryLock(ctx context.Context, name string) (store.Lock, bool, error) {
	if !s.d.Schema().Postgres {
		return nil, false, fmt.Errorf("lock %s: a store of one process has no shared locks: %w", name, errdefs.ErrNotImplemented)
	}
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		return nil, false, lockError(ctx, name, err)
	}
	var ok bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock(hashtextextended($1, 0))", name).Scan(&ok); err != nil {
		conn.Close()
		return nil, false, lockError(ctx, name, err)
	}
	if !ok {
		conn.Close()
		return nil, false, nil
	}
	l := &pgLock{conn: conn, name: name, lost: make(chan struct{}), stop: make(chan struct{})}
	go l.watch()
	return l, true, nil
}

// WaitLockSlots is how many Lock locks a process holds at once, each on a
// connection of its own: a store's pool needs this many connections over
// what its queries use (postgres.Open adds them), so that holders of these
// locks can always run the queries they guard.
const WaitLockSlots = 4

// Lock waits for the PostgreSQL session advisory lock name and takes it on
// its own connection, for a short section one process at a time runs (a
// tenant's quota check and the insert it guards). While WaitLockSlots are
// held, it first waits for one of them to be released. SQLite has none
// (errdefs.ErrNotImplemented). An ended ctx ends the wait with its error.
func (s *Store) Lock(ctx context.Context, name string) (store.Lock, error) {
	if !s.d.Schema().Postgres {
		return nil, fmt.Errorf("lock %s: a store of one process has no shared locks: %w", name, errdefs.ErrNotImplemented)
	}
	select {
	case s.waitSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("lock %s: %w", name, ctx.Err())
	}
	freeSlot := func() { <-s.waitSlots }
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		freeSlot()
		return nil, lockError(ctx, name, err)
	}
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(hashtextextended($1, 0))", name); err != nil {
		// A cancelled wait may leave the session in any state: drop it.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		conn.Close()
		freeSlot()
		return nil, lockError(ctx, name, err)
	}
	l := &pgLock{conn: conn, name: name, lost: make(chan struct{}), stop: make(chan struct{}), released: freeSlot}
	go l.watch()
	return l, nil
}

// lockError is the error of a lock call that failed with err: the
// context's error when ctx has ended (also while a connection was being
// dialled, which takes long on a loaded machine: the caller's wait ended,
// the database did not fail), else unavailable.
func lockError(ctx context.Context, name string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("lock %s: %w", name, ctx.Err())
	}
	return fmt.Errorf("lock %s: %v: %w", name, err, errdefs.ErrUnavailable)
}

// pgLock is a session advisory lock held on conn.
type pgLock struct {
	conn *sql.Conn
	name string
	once sync.Once
	lost chan struct{}
	stop chan struct{}
	// released, if set, runs once the lock is given up.
	released func()
}

func (l *pgLock) Lost() <-chan struct{} { return l.lost }

// watch checks the connection; when it breaks the session, and with it
// the lock, is gone.
func (l *pgLock) watch() {
	t := time.NewTicker(lockCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), lockCheckEvery)
			err := l.conn.PingContext(ctx)
			cancel()
			if err != nil {
				close(l.lost)
				_ = l.conn.Raw(func(any) error { return driver.ErrBadConn }) // drop it from the pool
				l.conn.Close()
				return
			}
		}
	}
}

func (l *pgLock) Release() {
	l.once.Do(func() {
		close(l.stop)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = l.conn.ExecContext(ctx, "SELECT pg_advisory_unlock(hashtextextended($1, 0))", l.name)
		l.conn.Close()
		if l.released != nil {
			l.released()
		}
	})
}

var _ store.Adopter = (*Store)(nil)

// AdoptSandboxes moves the live sandboxes of instance from to instance to.
func (s *Store) AdoptSandboxes(ctx context.Context, from, to string, now time.Time) (int, error) {
	if from == "" || to == "" || from == to {
		return 0, fmt.Errorf("adopt sandboxes: instances %q and %q: %w", from, to, errdefs.ErrInvalidArgument)
	}
	at, err := s.encodeTime("updated_at", now)
	if err != nil {
		return 0, err
	}
	res, err := s.writer.ExecContext(ctx, s.q(`UPDATE sandboxes SET instance = ?, resource_version = resource_version + 1, updated_at = ?
		WHERE instance = ? AND state <> 'destroyed'`), to, at, from)
	if err != nil {
		return 0, fmt.Errorf("adopt sandboxes of %s: %v: %w", from, err, errdefs.ErrUnavailable)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// TakeSandbox moves one live sandbox from instance from to instance to.
func (s *Store) TakeSandbox(ctx context.Context, id, from, to string, now time.Time) error {
	if from == "" || to == "" || from == to {
		return fmt.Errorf("take sandbox %s: instances %q and %q: %w", id, from, to, errdefs.ErrInvalidArgument)
	}
	at, err := s.encodeTime("updated_at", now)
	if err != nil {
		return err
	}
	res, err := s.writer.ExecContext(ctx, s.q(`UPDATE sandboxes SET instance = ?, resource_version = resource_version + 1, updated_at = ?
		WHERE id = ? AND instance = ? AND state <> 'destroyed'`), to, at, id, from)
	if err != nil {
		return s.dbError(ctx, "take sandbox "+id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("take sandbox %s: not a live sandbox of %s: %w", id, from, errdefs.ErrPreconditionFailed)
	}
	return nil
}

// LiveInstances lists the owners of live sandboxes.
func (s *Store) LiveInstances(ctx context.Context) ([]string, error) {
	return appendRows(ctx, s, s.reader, nil, "list live instances", func(r scanner) (string, error) {
		var inst string
		return inst, r.Scan(&inst)
	}, `SELECT DISTINCT instance FROM sandboxes WHERE state NOT IN ('destroyed', 'failed') AND instance <> '' ORDER BY instance`)
}
