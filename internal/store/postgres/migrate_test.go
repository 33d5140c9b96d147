package postgres

import (
	"errors"
	"testing"
	"testing/fstest"

	"genesis.dev/sandbox/internal/errdefs"
)

func TestLoadMigrationsEmbedded(t *testing.T) {
	migs, err := loadMigrations(migrationFS)
	if err != nil {
		t.Fatalf("embedded migrations: %v", err)
	}
	if migs[0].version != 1 || migs[0].name != "0001_init.sql" {
		t.Errorf("first migration = %d %s, want 1 0001_init.sql", migs[0].version, migs[0].name)
	}
}

func TestLoadMigrationsRejectsBadSets(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name  string
		fsys  fstest.MapFS
		want  []int
		valid bool
	}{
		{"ordered", fstest.MapFS{"migrations/0002_b.sql": file("b"), "migrations/0001_a.sql": file("a"), "migrations/README": file("x")}, []int{1, 2}, true},
		{"gap", fstest.MapFS{"migrations/0001_a.sql": file("a"), "migrations/0003_c.sql": file("c")}, nil, false},
		{"duplicate", fstest.MapFS{"migrations/0001_a.sql": file("a"), "migrations/0001_b.sql": file("b")}, nil, false},
		{"starts at 2", fstest.MapFS{"migrations/0002_a.sql": file("a")}, nil, false},
		{"bad name", fstest.MapFS{"migrations/init.sql": file("a")}, nil, false},
		{"empty", fstest.MapFS{"migrations/README": file("x")}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			migs, err := loadMigrations(tc.fsys)
			if !tc.valid {
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
			if len(got) != len(tc.want) || got[0] != tc.want[0] || got[1] != tc.want[1] {
				t.Errorf("versions = %v, want %v", got, tc.want)
			}
		})
	}
}
