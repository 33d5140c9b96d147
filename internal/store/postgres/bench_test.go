package postgres_test

import (
	"testing"

	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/store/pgtest"
	"genesis.dev/sandbox/internal/store/postgres"
	"genesis.dev/sandbox/internal/store/storetest"
)

func BenchmarkPostgres(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Store {
		s, err := postgres.Open(b.Context(), postgres.Config{DSN: pgtest.Start(b), MaxConns: testMaxConns})
		if err != nil {
			b.Fatal(err)
		}
		return s
	})
}
