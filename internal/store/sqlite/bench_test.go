package sqlite_test

import (
	"path/filepath"
	"testing"

	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/store/sqlite"
	"genesis.dev/sandbox/internal/store/storetest"
)

func BenchmarkFile(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store {
		s, err := sqlite.Open(b.Context(), sqlite.Config{Path: filepath.Join(b.TempDir(), "state.db")})
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}
