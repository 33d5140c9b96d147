package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"genesis.dev/sandbox/internal/errdefs"
)

// Times are stored as int64 nanoseconds since the Unix epoch, which covers
// the years 1677 to 2262.
var (
	minTime = time.Unix(0, math.MinInt64).UTC()
	maxTime = time.Unix(0, math.MaxInt64).UTC()
)

// encodeTime returns t as Unix nanoseconds; times outside the int64 range are
// ErrInvalidArgument.
func encodeTime(field string, t time.Time) (int64, error) {
	if t.Before(minTime) || t.After(maxTime) {
		return 0, fmt.Errorf("%s %v is out of range (%d to %d): %w", field, t, minTime.Year(), maxTime.Year(), errdefs.ErrInvalidArgument)
	}
	return t.UnixNano(), nil
}

// encodeOptTime encodes an optional time; nil is NULL.
func encodeOptTime(field string, t *time.Time) (*int64, error) {
	if t == nil {
		return nil, nil
	}
	ns, err := encodeTime(field, *t)
	if err != nil {
		return nil, err
	}
	return &ns, nil
}

func decodeTime(ns int64) time.Time { return time.Unix(0, ns).UTC() }

func decodeOptTime(ns *int64) *time.Time {
	if ns == nil {
		return nil
	}
	t := decodeTime(*ns)
	return &t
}

// encodeJSON returns v as JSON for a JSONB column; empty is true for an
// empty map or slice, which is stored as NULL (a nil []byte).
func encodeJSON(field string, v any, empty bool) ([]byte, error) {
	if empty {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w: %w", field, errdefs.ErrInvalidArgument, err)
	}
	return b, nil
}

// decodeJSON fills v from a stored JSONB value; NULL leaves v untouched.
func decodeJSON(field string, b []byte, v any) error {
	if b == nil {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("stored %s: %w: %w", field, errdefs.ErrInternal, err)
	}
	return nil
}

// SQLSTATE codes the store tells apart.
// https://www.postgresql.org/docs/current/errcodes-appendix.html
const (
	sqlstateUniqueViolation     = "23505"
	sqlstateForeignKeyViolation = "23503"
	sqlstateQueryCanceled       = "57014"
)

// sqlstate returns the SQLSTATE of a server error, or "".
func sqlstate(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func isUniqueViolation(err error) bool     { return sqlstate(err) == sqlstateUniqueViolation }
func isForeignKeyViolation(err error) bool { return sqlstate(err) == sqlstateForeignKeyViolation }

// dbError classifies a database error for op:
//   - a store error already classified keeps its class;
//   - an expired ctx (or a statement timeout) is ErrDeadlineExceeded, a
//     canceled ctx is ErrUnavailable, and both keep the context error;
//   - a server that cannot be reached, is shutting down, is out of
//     connections, is a read-only standby, or aborted the transaction for a
//     serialization failure or deadlock is ErrUnavailable (retry later);
//   - a unique violation is ErrAlreadyExists, a foreign-key violation is
//     ErrNotFound, bad data (SQLSTATE class 22, e.g. a NUL byte in a text
//     value) is ErrInvalidArgument;
//   - anything else is ErrInternal.
func dbError(ctx context.Context, op string, err error) error {
	wrap := func(class error) error {
		return fmt.Errorf("postgres store: %s: %w: %w", op, class, err)
	}
	switch {
	case classified(err):
		return fmt.Errorf("postgres store: %s: %w", op, err)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("postgres store: %s: %w: %w", op, errdefs.ErrDeadlineExceeded, errors.Join(err, ctx.Err()))
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return fmt.Errorf("postgres store: %s: %w: %w", op, errdefs.ErrUnavailable, errors.Join(err, ctx.Err()))
	}
	code := sqlstate(err)
	switch {
	case code == "":
		if isConnectionError(err) {
			return wrap(errdefs.ErrUnavailable)
		}
		return wrap(errdefs.ErrInternal)
	case code == sqlstateUniqueViolation:
		return wrap(errdefs.ErrAlreadyExists)
	case code == sqlstateForeignKeyViolation:
		return wrap(errdefs.ErrNotFound)
	case code == sqlstateQueryCanceled: // statement_timeout
		return wrap(errdefs.ErrDeadlineExceeded)
	case strings.HasPrefix(code, "22"): // data exception
		return wrap(errdefs.ErrInvalidArgument)
	case strings.HasPrefix(code, "08"), // connection exception
		strings.HasPrefix(code, "53"),  // insufficient resources (too many connections, disk full)
		strings.HasPrefix(code, "57P"), // admin shutdown, crash shutdown, cannot connect now
		strings.HasPrefix(code, "40"),  // serialization failure, deadlock detected
		code == "55P03",                // lock not available (lock_timeout)
		code == "25006":                // read-only transaction: a standby after a failover
		return wrap(errdefs.ErrUnavailable)
	}
	return wrap(errdefs.ErrInternal)
}

// classified reports whether err already carries one of the store's classes
// (a stored value that does not decode, a time out of range).
func classified(err error) bool {
	return errors.Is(err, errdefs.ErrInternal) || errors.Is(err, errdefs.ErrInvalidArgument)
}

// isConnectionError reports an error of the connection rather than of the
// statement: the server could not be reached or the connection broke.
func isConnectionError(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
