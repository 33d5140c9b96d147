package sqlstore

import (
	"context"
	"io/fs"
)

// MigrateFrom runs the migrations of fsys (migrations/NNNN_name.sql) on s,
// for tests of later steps of the history.
func MigrateFrom(ctx context.Context, s *Store, fsys fs.FS) error { return s.migrateFrom(ctx, fsys) }

// MigrationFS is the embedded history.
var MigrationFS = migrationFS

// PreparedStatements is how many statements s keeps prepared (stmtCache).
func PreparedStatements(s *Store) int {
	if s.stmts == nil {
		return 0
	}
	s.stmts.mu.Lock()
	defer s.stmts.mu.Unlock()
	return len(s.stmts.stmts)
}
