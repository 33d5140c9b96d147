package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// stmtCache keeps the statements of the hot path (the queries that go
// through Store.hot: reads of one record by id, the job writes, the audit
// insert) prepared, one per database and query, so that SQLite parses
// each of them once per connection rather than on every call. Its set of
// queries is bounded by the code: only fixed query texts pass through
// hot. A statement is prepared on a *sql.DB outside any transaction: a
// transaction that meets a query not yet prepared runs it unprepared and
// asks for it (want), and inTx prepares what was asked for once the
// transaction has ended, because preparing on SQLite's single write
// connection while a transaction holds it would wait for itself.
type stmtCache struct {
	mu    sync.Mutex
	stmts map[stmtKey]*sql.Stmt
	want  map[string]bool // queries transactions met unprepared
}

type stmtKey struct {
	db    *sql.DB
	query string
}

func newStmtCache() *stmtCache {
	return &stmtCache{stmts: map[stmtKey]*sql.Stmt{}, want: map[string]bool{}}
}

// get returns the prepared statement of query on db, preparing it if
// prepare is set, or nil (the caller runs the query unprepared, and meets
// the error of a query that does not prepare as it would have without
// the cache).
func (c *stmtCache) get(ctx context.Context, db *sql.DB, query string, prepare bool) *sql.Stmt {
	k := stmtKey{db, query}
	c.mu.Lock()
	st, ok := c.stmts[k]
	if !ok && !prepare {
		c.want[query] = true
	}
	c.mu.Unlock()
	if ok || !prepare {
		return st
	}
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.stmts[k]; ok { // another caller won
		_ = st.Close()
		return prev
	}
	c.stmts[k] = st
	return st
}

// prepareWanted prepares on db the queries transactions asked for.
func (c *stmtCache) prepareWanted(ctx context.Context, db *sql.DB) {
	c.mu.Lock()
	if len(c.want) == 0 {
		c.mu.Unlock()
		return
	}
	var queries []string
	for q := range c.want {
		queries = append(queries, q)
	}
	clear(c.want)
	c.mu.Unlock()
	for _, q := range queries {
		c.get(ctx, db, q, true)
	}
}

// close closes every cached statement.
func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for k, st := range c.stmts {
		errs = append(errs, st.Close())
		delete(c.stmts, k)
	}
	return errors.Join(errs...)
}

// hot returns q running the queries given to it as prepared statements
// (Config.PrepareHot); without the cache it is q. Only fixed query texts
// may pass through it.
func (s *Store) hot(q queryer) queryer {
	if s.stmts == nil {
		return q
	}
	return hotQueryer{s: s, q: q}
}

// hotQueryer is a queryer whose queries run as cached prepared
// statements where one is ready.
type hotQueryer struct {
	s *Store
	q queryer
}

func (h hotQueryer) stmt(ctx context.Context, query string) *sql.Stmt {
	switch q := h.q.(type) {
	case *sql.DB:
		return h.s.stmts.get(ctx, q, query, true)
	case *sql.Tx: // every transaction runs on the writer
		if base := h.s.stmts.get(ctx, h.s.writer, query, false); base != nil {
			return q.StmtContext(ctx, base)
		}
	}
	return nil
}

func (h hotQueryer) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := h.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return h.q.QueryRowContext(ctx, query, args...)
}

func (h hotQueryer) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := h.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return h.q.QueryContext(ctx, query, args...)
}

func (h hotQueryer) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := h.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return h.q.ExecContext(ctx, query, args...)
}
