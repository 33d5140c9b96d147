package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
)

// collectRows scans every row of a query's result with scan and appends it
// to out; err is the query's own error. op names the call in errors.
func collectRows[T any](ctx context.Context, op string, out []T, scan func(pgx.Row) (T, error), rows pgx.Rows, err error) ([]T, error) {
	if err != nil {
		return nil, dbError(ctx, op, err)
	}
	defer rows.Close()
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, dbError(ctx, op, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError(ctx, op, err)
	}
	return out, nil
}

// oldestFirst finishes a list query: base, the conditions where joined with
// AND, oldest first (by created_at, then insertion order), at most limit
// rows when limit > 0 (its placeholder added to a).
func oldestFirst(base string, where []string, a *args, limit int) string {
	q := base
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY created_at, seq"
	if limit > 0 {
		q += " LIMIT " + a.add(limit)
	}
	return q
}
