package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// timeLayout is fixed-width so that stored times sort as text and keep every
// nanosecond. Times are always stored in UTC.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// encodeTime renders t in UTC. Years outside 1–9999 do not fit the layout.
func encodeTime(field string, t time.Time) (string, error) {
	u := t.UTC()
	if y := u.Year(); y < 1 || y > 9999 {
		return "", fmt.Errorf("%s %v is out of range (years 1 to 9999): %w", field, t, errdefs.ErrInvalidArgument)
	}
	return u.Format(timeLayout), nil
}

// encodeOptTime renders an optional time; nil is NULL.
func encodeOptTime(field string, t *time.Time) (sql.NullString, error) {
	if t == nil {
		return sql.NullString{}, nil
	}
	s, err := encodeTime(field, *t)
	return sql.NullString{String: s, Valid: err == nil}, err
}

func decodeTime(field, s string) (time.Time, error) {
	t, err := time.Parse(timeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored %s %q: %w: %w", field, s, errdefs.ErrInternal, err)
	}
	return t.UTC(), nil
}

func decodeOptTime(field string, s sql.NullString) (*time.Time, error) {
	if !s.Valid {
		return nil, nil
	}
	t, err := decodeTime(field, s.String)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// encodeJSON stores v as JSON text; empty is true for an empty map or slice,
// which is stored as NULL.
func encodeJSON(field string, v any, empty bool) (sql.NullString, error) {
	if empty {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return sql.NullString{}, fmt.Errorf("encode %s: %w: %w", field, errdefs.ErrInvalidArgument, err)
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

// decodeJSON fills v from stored JSON text; NULL leaves v untouched.
func decodeJSON(field string, s sql.NullString, v any) error {
	if !s.Valid {
		return nil
	}
	if err := json.Unmarshal([]byte(s.String), v); err != nil {
		return fmt.Errorf("stored %s: %w: %w", field, errdefs.ErrInternal, err)
	}
	return nil
}

// sqliteCode returns the extended result code of err, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

// dbError classifies a database error for op: context expiry keeps its
// context error, a busy or locked database is ErrUnavailable and anything
// else is ErrInternal.
func dbError(ctx context.Context, op string, err error) error {
	code := sqliteCode(err)
	switch {
	case errors.Is(err, errdefs.ErrInternal): // already classified (a stored value that does not decode)
		return fmt.Errorf("sqlite store: %s: %w", op, err)
	case errors.Is(err, context.DeadlineExceeded) ||
		(code&0xff == sqlite3.SQLITE_INTERRUPT && errors.Is(ctx.Err(), context.DeadlineExceeded)):
		return fmt.Errorf("sqlite store: %s: %w: %w", op, errdefs.ErrDeadlineExceeded, errors.Join(err, ctx.Err()))
	case errors.Is(err, context.Canceled) ||
		(code&0xff == sqlite3.SQLITE_INTERRUPT && ctx.Err() != nil):
		return fmt.Errorf("sqlite store: %s: %w: %w", op, errdefs.ErrUnavailable, errors.Join(err, ctx.Err()))
	case code&0xff == sqlite3.SQLITE_BUSY || code&0xff == sqlite3.SQLITE_LOCKED:
		return fmt.Errorf("sqlite store: %s: database is busy: %w: %w", op, errdefs.ErrUnavailable, err)
	}
	return fmt.Errorf("sqlite store: %s: %w: %w", op, errdefs.ErrInternal, err)
}

// isUniqueViolation reports a primary-key or unique constraint failure.
func isUniqueViolation(err error) bool {
	c := sqliteCode(err)
	return c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || c == sqlite3.SQLITE_CONSTRAINT_UNIQUE
}

// isForeignKeyViolation reports a foreign-key constraint failure.
func isForeignKeyViolation(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}
