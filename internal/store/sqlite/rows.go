package sqlite

import (
	"context"
	"database/sql"
	"strings"
)

// updateRow is the read-modify-write of one record in one write
// transaction: get reads the current record and write makes the next one
// from it and stores it. what names the record in errors ("job j-1"). The
// transaction is always rolled back on the way out (a no-op after Commit),
// so an error or a panic in write never leaves the single writer inside a
// transaction.
func updateRow[T any](ctx context.Context, s *Store, what string, get func(tx queryer) (T, error), write func(tx *sql.Tx, cur T) (T, error)) (T, error) {
	var zero T
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return zero, dbError(ctx, "update "+what, err)
	}
	defer func() { _ = tx.Rollback() }()
	cur, err := get(tx)
	if err != nil {
		return zero, err
	}
	next, err := write(tx, cur)
	if err != nil {
		return zero, err
	}
	if err := tx.Commit(); err != nil {
		return zero, dbError(ctx, "commit "+what, err)
	}
	return next, nil
}

// appendRows runs query, scans every row with scan and appends it to out.
// op names the call in errors.
func appendRows[T any](ctx context.Context, q rowsQueryer, out []T, op string, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.QueryContext(ctx, query, args...)
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
// rows when limit > 0.
func oldestFirst(base string, where []string, args []any, limit int) (string, []any) {
	q := base
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY created_at, rowid"
	if limit > 0 {
		q += " LIMIT ?"
		args = append(args, limit)
	}
	return q, args
}
