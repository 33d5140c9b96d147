package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/sandbox"
)

// fileSize is the size of the database file itself (not its WAL): it grows
// only when a checkpoint copies pages into it.
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestCommitsDoNotCheckpoint: a write connection's commits leave the WAL's
// pages in the WAL, however many (SQLite's default would checkpoint inside
// the commit past 1000 pages).
func TestCommitsDoNotCheckpoint(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if err := enableWAL(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(t.Context(), "CREATE TABLE x (v BLOB)"); err != nil {
		t.Fatal(err)
	}
	before := fileSize(t, path)
	blob := []byte(strings.Repeat("x", 8000)) // two pages a row
	for range 1500 {                          // 3000 pages, in 1500 commits
		if _, err := db.ExecContext(t.Context(), "INSERT INTO x VALUES (?)", blob); err != nil {
			t.Fatal(err)
		}
	}
	if after := fileSize(t, path); after != before {
		t.Errorf("the database file grew from %d to %d bytes: a commit checkpointed", before, after)
	}
}

// TestCheckpointer: the store's own checkpoints copy the WAL into the
// database file while it runs.
func TestCheckpointer(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(t.Context(), Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := fileSize(t, path)
	now := time.Now().UTC()
	for i := range 200 {
		sb := &sandbox.Sandbox{ID: sandbox.NewID("sbx"), Tenant: "t", Profile: "p", Runtime: "runc", RiskLevel: "low",
			State: sandbox.StateReady, Image: fmt.Sprintf("image-%d-%s", i, strings.Repeat("i", 2000)), CreatedAt: now, UpdatedAt: now}
		if err := s.CreateSandbox(t.Context(), sb); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for fileSize(t, path) <= before {
		if time.Now().After(deadline) {
			t.Fatalf("the database file is still %d bytes: no checkpoint ran", before)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestNextPause(t *testing.T) {
	mid := 2 * checkpointMinPause
	for _, c := range []struct {
		name  string
		pause time.Duration
		w     walState
		err   error
		want  time.Duration
	}{
		{"little written: longer", checkpointMinPause, walState{frames: 10, copied: 10}, nil, 2 * checkpointMinPause},
		{"nothing written, at the bound", checkpointMaxPause, walState{}, nil, checkpointMaxPause},
		{"about the target: the same", mid, walState{frames: checkpointFrames + 1, copied: checkpointFrames + 1}, nil, mid},
		{"much written: shorter", mid, walState{frames: 3 * checkpointFrames, copied: 3 * checkpointFrames}, nil, checkpointMinPause},
		{"a reader held pages back: shorter", mid, walState{frames: checkpointFrames + 1, copied: 5}, nil, checkpointMinPause},
		{"never under the floor", checkpointMinPause, walState{frames: 9 * checkpointFrames}, nil, checkpointMinPause},
		{"an error: the longest", checkpointMinPause, walState{}, errors.New("x"), checkpointMaxPause},
	} {
		if got := nextPause(c.pause, c.w, c.err); got != c.want {
			t.Errorf("%s: nextPause(%v, %+v, %v) = %v, want %v", c.name, c.pause, c.w, c.err, got, c.want)
		}
	}
}
