package control_test

import (
	"os"
	"testing"

	"genesis.dev/sandbox/internal/store/pgtest"
)

// TestMain stops the PostgreSQL cluster the tests of several instances on
// one store start.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
