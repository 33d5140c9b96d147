package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
)

// TextTimeLayout is the stored form of a time in a text column: fixed-width,
// so that stored times sort as text, and keeping every nanosecond. Times are
// always stored in UTC. Dialects that store times as text use it.
const TextTimeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// dbTime scans a stored time in any of the dialects' forms: Unix
// nanoseconds (an integer) or TextTimeLayout text. NULL is not valid.
type dbTime struct {
	t     time.Time
	valid bool
}

// Scan implements sql.Scanner.
func (d *dbTime) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*d = dbTime{}
		return nil
	case int64:
		*d = dbTime{t: time.Unix(0, v).UTC(), valid: true}
		return nil
	case string:
		return d.parse(v)
	case []byte:
		return d.parse(string(v))
	}
	return fmt.Errorf("stored time of type %T: %w", src, errdefs.ErrInternal)
}

func (d *dbTime) parse(s string) error {
	t, err := time.Parse(TextTimeLayout, s)
	if err != nil {
		return fmt.Errorf("stored time %q: %w: %w", s, errdefs.ErrInternal, err)
	}
	*d = dbTime{t: t.UTC(), valid: true}
	return nil
}

// ptr returns the time, or nil for NULL.
func (d dbTime) ptr() *time.Time {
	if !d.valid {
		return nil
	}
	t := d.t
	return &t
}

// encodeTime is the dialect's stored form of t.
func (s *Store) encodeTime(field string, t time.Time) (any, error) {
	return s.d.EncodeTime(field, t)
}

// encodeOptTime encodes an optional time; nil is NULL.
func (s *Store) encodeOptTime(field string, t *time.Time) (any, error) {
	if t == nil {
		return nil, nil
	}
	return s.d.EncodeTime(field, *t)
}

// encodeJSON returns v as JSON text; empty is true for an empty map or
// slice, which is stored as NULL.
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

// decodeJSON fills v from stored JSON; NULL leaves v untouched.
func decodeJSON(field string, s sql.NullString, v any) error {
	if !s.Valid {
		return nil
	}
	if err := json.Unmarshal([]byte(s.String), v); err != nil {
		return fmt.Errorf("stored %s: %w: %w", field, errdefs.ErrInternal, err)
	}
	return nil
}

// marshalDoc encodes a record stored as a JSON document.
func marshalDoc(what string, v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("%s: %w: %w", what, errdefs.ErrInvalidArgument, err)
	}
	return string(b), nil
}

// unmarshalDoc decodes a record stored as a JSON document.
func unmarshalDoc(what, doc string, v any) error {
	if err := json.Unmarshal([]byte(doc), v); err != nil {
		return fmt.Errorf("%s: corrupt record: %w: %w", what, errdefs.ErrInternal, err)
	}
	return nil
}

func (s *Store) isUniqueViolation(err error) bool {
	return s.d.Classify(err) == KindUniqueViolation
}

func (s *Store) isForeignKeyViolation(err error) bool {
	return s.d.Classify(err) == KindForeignKeyViolation
}

// dbError classifies a database error for op:
//   - a store error already classified keeps its class;
//   - an expired ctx is ErrDeadlineExceeded, a canceled ctx is
//     ErrUnavailable, and both keep the context error;
//   - a transient failure (busy, locked, serialization failure, deadlock,
//     unreachable server) is ErrUnavailable (retry later);
//   - a unique violation is ErrAlreadyExists, a foreign-key violation is
//     ErrNotFound, a value the database cannot hold ErrInvalidArgument, a
//     server-side statement timeout ErrDeadlineExceeded;
//   - anything else is ErrInternal.
func (s *Store) dbError(ctx context.Context, op string, err error) error {
	name := s.d.Name()
	wrap := func(class error) error {
		return fmt.Errorf("%s store: %s: %w: %w", name, op, class, err)
	}
	switch {
	case errors.Is(err, errdefs.ErrInternal) || errors.Is(err, errdefs.ErrInvalidArgument):
		return fmt.Errorf("%s store: %s: %w", name, op, err)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("%s store: %s: %w: %w", name, op, errdefs.ErrDeadlineExceeded, errors.Join(err, ctx.Err()))
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return fmt.Errorf("%s store: %s: %w: %w", name, op, errdefs.ErrUnavailable, errors.Join(err, ctx.Err()))
	}
	switch s.d.Classify(err) {
	case KindUniqueViolation:
		return wrap(errdefs.ErrAlreadyExists)
	case KindForeignKeyViolation:
		return wrap(errdefs.ErrNotFound)
	case KindUnavailable:
		return wrap(errdefs.ErrUnavailable)
	case KindTimeout:
		return wrap(errdefs.ErrDeadlineExceeded)
	case KindInvalidValue:
		return wrap(errdefs.ErrInvalidArgument)
	}
	return wrap(errdefs.ErrInternal)
}
