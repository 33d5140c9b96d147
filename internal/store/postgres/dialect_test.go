package postgres

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"genesis.dev/sandbox/internal/store/sqlstore"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want sqlstore.ErrorKind
	}{
		{&pgconn.PgError{Code: "23505"}, sqlstore.KindUniqueViolation},
		{fmt.Errorf("insert: %w", &pgconn.PgError{Code: "23503"}), sqlstore.KindForeignKeyViolation},
		{&pgconn.PgError{Code: "40001"}, sqlstore.KindUnavailable}, // serialization failure
		{&pgconn.PgError{Code: "40P01"}, sqlstore.KindUnavailable}, // deadlock detected
		{&pgconn.PgError{Code: "57P01"}, sqlstore.KindUnavailable}, // admin shutdown
		{&pgconn.PgError{Code: "25006"}, sqlstore.KindUnavailable}, // read-only standby
		{&pgconn.PgError{Code: "57014"}, sqlstore.KindTimeout},
		{&pgconn.PgError{Code: "22021"}, sqlstore.KindInvalidValue}, // bad UTF-8
		{&pgconn.PgError{Code: "42P01"}, sqlstore.KindOther},        // undefined table
		{io.ErrUnexpectedEOF, sqlstore.KindUnavailable},
		{errors.New("something else"), sqlstore.KindOther},
	}
	for _, tc := range tests {
		if got := (Dialect{}).Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
