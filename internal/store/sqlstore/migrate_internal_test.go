package sqlstore

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"genesis.dev/sandbox/internal/errdefs"
)

var testSchemas = map[string]Schema{
	"sqlite-like": {Time: "TEXT", JSON: "TEXT", Int64: "INTEGER", Bool: "INTEGER", Bytes: "BLOB",
		Serial: "INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT", TableOptions: "STRICT"},
	"postgres-like": {Postgres: true, Time: "BIGINT", JSON: "JSONB", Int64: "BIGINT", Bool: "BOOLEAN", Bytes: "BYTEA",
		Seq: "seq BIGINT GENERATED ALWAYS AS IDENTITY,", SeqKey: ", seq", Serial: "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"},
}

func TestLoadMigrationsEmbedded(t *testing.T) {
	for name, schema := range testSchemas {
		migs, err := loadMigrations(migrationFS, schema)
		if err != nil {
			t.Fatalf("%s: embedded migrations: %v", name, err)
		}
		if migs[0].version != baselineVersion || migs[0].name != "0008_baseline.sql" {
			t.Errorf("%s: first migration = %d %s, want %d 0008_baseline.sql", name, migs[0].version, migs[0].name, baselineVersion)
		}
		if strings.Contains(migs[0].sql, "{{") || strings.Contains(migs[0].sql, "<no value>") {
			t.Errorf("%s: baseline not fully rendered:\n%s", name, migs[0].sql)
		}
		if got := strings.Contains(migs[0].sql, "USING GIN"); got != schema.Postgres {
			t.Errorf("%s: GIN index present = %v, want %v", name, got, schema.Postgres)
		}
	}
}

func TestLoadMigrationsRejectsBadSets(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name string
		fsys fstest.MapFS
		want []int // nil: rejected
	}{
		{"ordered", fstest.MapFS{"migrations/0009_b.sql": file("b"), "migrations/0008_a.sql": file("a {{.Time}}"), "migrations/README": file("x")}, []int{8, 9}},
		{"gap", fstest.MapFS{"migrations/0008_a.sql": file("a"), "migrations/0010_c.sql": file("c")}, nil},
		{"duplicate", fstest.MapFS{"migrations/0008_a.sql": file("a"), "migrations/0008_b.sql": file("b")}, nil},
		{"starts in the old histories", fstest.MapFS{"migrations/0001_a.sql": file("a")}, nil},
		{"starts after the baseline", fstest.MapFS{"migrations/0009_a.sql": file("a")}, nil},
		{"bad name", fstest.MapFS{"migrations/init.sql": file("a")}, nil},
		{"unknown template field", fstest.MapFS{"migrations/0008_a.sql": file("a {{.Nope}}")}, nil},
		{"empty", fstest.MapFS{"migrations/README": file("x")}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			migs, err := loadMigrations(tc.fsys, testSchemas["sqlite-like"])
			if tc.want == nil {
				if !errors.Is(err, errdefs.ErrInternal) {
					t.Fatalf("loadMigrations = %v, %v; want an ErrInternal error", migs, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, m := range migs {
				got = append(got, m.version)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("versions = %v, want %v", got, tc.want)
			}
			if migs[0].sql != "a TEXT" {
				t.Errorf("rendered %q, want %q", migs[0].sql, "a TEXT")
			}
		})
	}
}

// dollarDialect numbers placeholders as PostgreSQL does; only Placeholder
// is used.
type dollarDialect struct{ Dialect }

func (dollarDialect) Placeholder(n int) string { return "$" + strconv.Itoa(n) }

func TestRebind(t *testing.T) {
	s := &Store{d: dollarDialect{}, rebound: new(sync.Map)}
	tests := map[string]string{
		"SELECT 1":                              "SELECT 1",
		"SELECT a FROM t WHERE b = ? AND c = ?": "SELECT a FROM t WHERE b = $1 AND c = $2",
		"INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)": "INSERT INTO t VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
	}
	for in, want := range tests {
		for range 2 { // the second answer comes from the cache
			if got := s.q(in); got != want {
				t.Errorf("q(%q) = %q, want %q", in, got, want)
			}
		}
	}
	plain := &Store{d: dollarDialect{}}
	if got := plain.q("a = ?"); got != "a = ?" {
		t.Errorf("q without rebinding = %q", got)
	}
}
