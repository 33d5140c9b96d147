package sqlite_test

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/store/sqlite"
	"genesis.dev/sandbox/internal/store/sqlstore"
	"genesis.dev/sandbox/internal/store/storetest"
)

func openFile(t testing.TB, path string) *sqlstore.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return s
}

func TestConformanceFile(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return openFile(t, filepath.Join(t.TempDir(), "state.db"))
	})
}

func TestConformanceMemory(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return openFile(t, sqlite.MemoryPath)
	})
}

func TestFileSettings(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	s := openFile(t, path)
	defer s.Close()
	raw, err := sql.Open("sqlite", path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var mode string
	if err := raw.QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
}

// TestFilesOwnerOnly: the database and the files SQLite makes beside it are
// readable by the service's user alone, whether the store creates the
// database or finds one another mode made.
func TestFilesOwnerOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fresh, old := filepath.Join(dir, "fresh.db"), filepath.Join(dir, "old.db")
	if err := os.WriteFile(old, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(old, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	for _, path := range []string{fresh, old} {
		s := openFile(t, path)
		if _, err := s.ListSandboxes(t.Context(), store.SandboxFilter{}); err != nil { // the WAL and shm exist once used
			t.Fatal(err)
		}
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if perm := fi.Mode().Perm(); perm&0o077 != 0 {
				t.Errorf("%s: mode %o, want no access for group and others", filepath.Base(p), perm)
			}
		}
		s.Close()
	}
}

func TestMemoryStoresAreSeparate(t *testing.T) {
	t.Parallel()
	a := openFile(t, sqlite.MemoryPath)
	defer a.Close()
	b := openFile(t, sqlite.MemoryPath)
	defer b.Close()
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := a.CreateSandbox(t.Context(), &sandbox.Sandbox{ID: "sbx_x", State: sandbox.StateCreated, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetSandbox(t.Context(), "", "sbx_x"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("second in-memory store sees the first one's sandbox: err = %v", err)
	}
}

func TestOpenRejectsBadPath(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"", "state.db?mode=ro", "file:state.db"} {
		s, err := sqlite.Open(t.Context(), sqlite.Config{Path: path})
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded, want ErrInvalidArgument", path)
			continue
		}
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("Open(%q) error = %v, want class ErrInvalidArgument", path, err)
		}
	}
}

// TestTimeRange: the text form holds the years 1 to 9999 only.
func TestTimeRange(t *testing.T) {
	t.Parallel()
	s := openFile(t, sqlite.MemoryPath)
	defer s.Close()
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Time{time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)} {
		err := s.CreateSandbox(t.Context(), &sandbox.Sandbox{ID: "sbx_t", CreatedAt: at, UpdatedAt: now})
		if !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("CreateSandbox created %v: err = %v, want class ErrInvalidArgument", at, err)
		}
	}
	for _, at := range []time.Time{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)} {
		if err := s.CreateSandbox(t.Context(), &sandbox.Sandbox{ID: "sbx_" + strconv.Itoa(at.Year()), CreatedAt: at, UpdatedAt: now}); err != nil {
			t.Errorf("CreateSandbox created %v: %v", at, err)
		}
	}
}
