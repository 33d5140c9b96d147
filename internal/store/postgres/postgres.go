package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/store"
)

// Config configures a Store.
type Config struct {
	// DSN is a libpq connection string or postgres:// URL, e.g.
	// "postgres://sandbox@db.internal:5432/sandbox?sslmode=verify-full".
	// pgx's pool settings (pool_max_conns, …) in it are honoured unless
	// MaxConns overrides them.
	DSN string
	// Logger receives migration and lifecycle messages; nil discards them.
	Logger *slog.Logger
	// MaxConns bounds the connection pool; 0 keeps the DSN's pool_max_conns
	// or pgx's default (the greater of 4 and the number of CPUs).
	MaxConns int32
}

// Store is the PostgreSQL implementation of store.Store. It is safe for
// concurrent use, also by several processes sharing one database.
type Store struct {
	pool *pgxpool.Pool
	log  *slog.Logger
}

var _ store.Store = (*Store)(nil)

// rollbackTimeout bounds the ROLLBACK of a failed transaction, which runs
// even when the caller's context has ended.
const rollbackTimeout = 5 * time.Second

// Open connects to the database named by cfg.DSN and applies any pending
// embedded migrations (under an advisory lock, so that processes starting
// together apply each migration once). It refuses, with an error of class
// errdefs.ErrFailedPrecondition and code "schema_too_new", a database whose
// schema version is newer than this build knows. An unreachable server is
// errdefs.ErrUnavailable.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.DSN == "" {
		return nil, fmt.Errorf("postgres store: empty DSN: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.MaxConns < 0 {
		return nil, fmt.Errorf("postgres store: negative MaxConns %d: %w", cfg.MaxConns, errdefs.ErrInvalidArgument)
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		// pgx redacts the password in its parse errors.
		return nil, fmt.Errorf("postgres store: parse DSN: %w: %w", errdefs.ErrInvalidArgument, err)
	}
	if cfg.MaxConns > 0 {
		pcfg.MaxConns = cfg.MaxConns
	}
	migs, err := loadMigrations(migrationFS)
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, pcfg.ConnConfig.Copy(), migs, log); err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("postgres store: create pool: %w: %w", errdefs.ErrInvalidArgument, err)
	}
	s := &Store{pool: pool, log: log}
	if err := s.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	log.Debug("postgres store opened", "host", pcfg.ConnConfig.Host, "database", pcfg.ConnConfig.Database,
		"max_conns", pcfg.MaxConns, "schema_version", migs[len(migs)-1].version)
	return s, nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return dbError(ctx, "ping", err)
	}
	return nil
}

// Close closes every connection of the pool, waiting for connections in use
// to be released.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// inTx runs f in a READ COMMITTED transaction and commits it. An error from
// f rolls the transaction back and is returned unchanged: f classifies its
// own database errors. A panic in f rolls back too, so that no row lock or
// connection is left behind.
func (s *Store) inTx(ctx context.Context, op string, f func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return dbError(ctx, op, err)
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		if rerr := tx.Rollback(rctx); rerr != nil && !errors.Is(rerr, pgx.ErrTxClosed) {
			// The pool discards a connection whose rollback failed.
			s.log.Debug("postgres store: rollback failed", "op", op, "err", rerr)
		}
	}()
	if err := f(tx); err != nil {
		return err
	}
	// A failed COMMIT ends the transaction as well; the deferred rollback
	// then finds it closed.
	err = tx.Commit(ctx)
	committed = err == nil
	if err != nil {
		return dbError(ctx, "commit "+op, err)
	}
	return nil
}
