package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/store"
)

// Config is what a backend's Open hands over.
type Config struct {
	// Dialect is the database's dialect.
	Dialect Dialect
	// Writer runs every write transaction (and, where Reader is nil, every
	// read). It must begin transactions the way the dialect expects: on
	// SQLite a single connection whose transactions begin with BEGIN
	// IMMEDIATE.
	Writer *sql.DB
	// Reader, if set, runs reads outside transactions (SQLite's read-only
	// connections of a file database).
	Reader *sql.DB
	// Logger receives migration and lifecycle messages; nil discards them.
	Logger *slog.Logger
	// PrepareHot keeps the hot path's statements prepared (stmtCache):
	// SQLite parses a statement on every unprepared call, while pgx
	// already caches PostgreSQL's statements itself.
	PrepareHot bool
	// OnClose, if set, runs first in Close (the dialect's own background
	// work on the database, such as SQLite's checkpoints).
	OnClose func() error
}

// Store is the SQL implementation of store.Store. It is safe for concurrent
// use, also by several processes sharing one database.
type Store struct {
	d      Dialect
	writer *sql.DB
	reader *sql.DB
	log    *slog.Logger
	// rebound caches queries with their placeholders rewritten for d
	// (string → string); nil when the dialect uses "?".
	rebound *sync.Map
	// waitSlots bounds the Lock locks held at once, each on a connection
	// of its own (WaitLockSlots).
	waitSlots chan struct{}
	// stmts holds the hot path's prepared statements (Config.PrepareHot);
	// nil without.
	stmts *stmtCache
	// onClose is Config.OnClose.
	onClose func() error
}

var _ store.Store = (*Store)(nil)

// Open migrates the database behind cfg.Writer to the schema this build
// knows and returns the store. It refuses, with errdefs.ErrFailedPrecondition
// and code "schema_too_new", a database written by a newer build, and with
// code "schema_too_old" one of an older history that has no bridge. The
// store owns the connection pools from then on (Close closes them); on error
// the caller closes them.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Dialect == nil || cfg.Writer == nil {
		return nil, errdefs.Invalid("sql store: dialect and writer are required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{d: cfg.Dialect, writer: cfg.Writer, reader: cfg.Reader, log: log, waitSlots: make(chan struct{}, WaitLockSlots), onClose: cfg.OnClose}
	if s.reader == nil {
		s.reader = s.writer
	}
	if s.d.Placeholder(1) != "?" {
		s.rebound = new(sync.Map)
	}
	if cfg.PrepareHot {
		s.stmts = newStmtCache()
	}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	if err := s.Ping(ctx); err != nil {
		return nil, err
	}
	log.Debug("store opened", "dialect", s.d.Name())
	return s, nil
}

// Ping checks that the database answers on both the read and write side.
func (s *Store) Ping(ctx context.Context) error {
	dbs := []*sql.DB{s.writer}
	if s.reader != s.writer {
		dbs = append(dbs, s.reader)
	}
	for _, db := range dbs {
		var one int
		if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
			return s.dbError(ctx, "ping", err)
		}
	}
	return nil
}

// Close closes the connection pools. An in-memory SQLite database is
// discarded.
func (s *Store) Close() error {
	var errs []error
	if s.onClose != nil {
		errs = append(errs, s.onClose())
	}
	if s.stmts != nil {
		errs = append(errs, s.stmts.close())
	}
	if s.reader != s.writer {
		errs = append(errs, s.reader.Close())
	}
	errs = append(errs, s.writer.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s store: close: %w: %w", s.d.Name(), errdefs.ErrInternal, err)
	}
	return nil
}

// q returns query with its "?" placeholders in the dialect's form. Queries
// hold no "?" inside string literals.
func (s *Store) q(query string) string {
	if s.rebound == nil {
		return query
	}
	if v, ok := s.rebound.Load(query); ok {
		return v.(string)
	}
	var b strings.Builder
	n := 0
	rest := query
	for {
		i := strings.IndexByte(rest, '?')
		if i < 0 {
			b.WriteString(rest)
			break
		}
		n++
		b.WriteString(rest[:i])
		b.WriteString(s.d.Placeholder(n))
		rest = rest[i+1:]
	}
	out := b.String()
	s.rebound.Store(query, out)
	return out
}

// queryer is a *sql.DB or a *sql.Tx.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface {
	Scan(dest ...any) error
}

// inTx runs f in a write transaction and commits it. An error from f rolls
// the transaction back and is returned unchanged: f classifies its own
// database errors. A panic in f rolls back too, so that no row lock, and on
// SQLite not the single writer, is left behind. When ctx ends during the
// transaction, database/sql rolls it back.
func (s *Store) inTx(ctx context.Context, op string, f func(tx *sql.Tx) error) error {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return s.dbError(ctx, op, err)
	}
	defer func() {
		_ = tx.Rollback() // a no-op after Commit
		if s.stmts != nil {
			// The writer is free again: prepare what the transaction met
			// unprepared.
			s.stmts.prepareWanted(context.WithoutCancel(ctx), s.writer)
		}
	}()
	if err := f(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return s.dbError(ctx, "commit "+op, err)
	}
	return nil
}

// update is the read-modify-write of one record: in one write transaction,
// get reads the current record (with the row lock) and write makes the
// next one from it and stores it.
func update[T any](ctx context.Context, s *Store, what string, get func(tx *sql.Tx) (T, error), write func(tx *sql.Tx, cur T) (T, error)) (T, error) {
	var next T
	err := s.inTx(ctx, "update "+what, func(tx *sql.Tx) error {
		cur, err := get(tx)
		if err != nil {
			return err
		}
		next, err = write(tx, cur)
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return next, nil
}

// appendRows runs query on q, scans every row with scan and appends it to
// out. op names the call in errors.
func appendRows[T any](ctx context.Context, s *Store, q queryer, out []T, op string, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, s.dbError(ctx, op, err)
	}
	defer rows.Close()
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, s.dbError(ctx, op, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbError(ctx, op, err)
	}
	return out, nil
}

// conds collects the conditions of a list query, joined with AND, and
// their arguments.
type conds struct {
	where []string
	args  []any
}

// add appends cond with its arguments.
func (c *conds) add(cond string, args ...any) {
	c.where = append(c.where, cond)
	c.args = append(c.args, args...)
}

// eq appends "col = v" unless v is "" (a filter field left out).
func (c *conds) eq(col, v string) {
	if v != "" {
		c.add(col+" = ?", v)
	}
}

// in appends "col IN (…)" for values unless there are none; op is "IN" or
// "NOT IN".
func in[S ~string](c *conds, col, op string, values []S) {
	if len(values) == 0 {
		return
	}
	for _, v := range values {
		c.args = append(c.args, string(v))
	}
	c.where = append(c.where, col+" "+op+" (?"+strings.Repeat(", ?", len(values)-1)+")")
}

// sql returns base with the conditions.
func (c *conds) sql(base string) string {
	if len(c.where) == 0 {
		return base
	}
	return base + " WHERE " + strings.Join(c.where, " AND ")
}

// oldestFirst finishes a list query: base with the conditions, oldest first
// (by created_at, then insertion order), at most limit rows when limit > 0.
func (s *Store) oldestFirst(base string, c *conds, limit int) (string, []any) {
	q := c.sql(base) + " ORDER BY created_at, " + s.d.InsertOrder()
	if limit > 0 {
		q += " LIMIT ?"
		c.args = append(c.args, limit)
	}
	return q, c.args
}
