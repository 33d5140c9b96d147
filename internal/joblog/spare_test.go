package joblog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/agent/agentproto"
)

// inode is the inode number of the file at path.
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// spareInodes are the inodes of the spares ready now.
func spareInodes(t *testing.T, dir string) map[uint64]bool {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, spareDir))
	if err != nil {
		t.Fatal(err)
	}
	m := map[uint64]bool{}
	for _, e := range entries {
		m[inode(t, filepath.Join(dir, spareDir, e.Name()))] = true
	}
	return m
}

// TestSparesBecomeLogs: a new log is a spare renamed into place, works as
// a log, and more logs than spares are all made; Close removes the spares
// and leaves the logs.
func TestSparesBecomeLogs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.KeepSpares(3); err != nil {
		t.Fatal(err)
	}
	ready := spareInodes(t, dir)
	if len(ready) != 3 {
		t.Fatalf("%d spares ready, want 3", len(ready))
	}
	l, err := s.Get("job_a", true)
	if err != nil {
		t.Fatal(err)
	}
	if !ready[inode(t, s.path("job_a"))] {
		t.Error("the new log is not one of the spares")
	}
	if err := l.Append(out(agentproto.FrameStdout, 0, "hello"), exitFrame(t, 0)); err != nil {
		t.Fatal(err)
	}
	s.Release("job_a")
	v, err := s.View("job_a")
	if err != nil {
		t.Fatal(err)
	}
	if stdout, _, _, exit := collect(t, v, 0); string(stdout) != "hello" || !exit {
		t.Errorf("log read back: stdout %q, exit %v", stdout, exit)
	}
	for i := range 10 { // more than the spares: the refill or Get itself makes the rest
		id := fmt.Sprintf("job_%d", i)
		if _, err := s.Get(id, true); err != nil {
			t.Fatal(err)
		}
		s.Release(id)
	}
	if got := s.Expired(time.Now().Add(time.Hour)); len(got) != 11 {
		t.Errorf("expired lists %d logs (%v), want the 11 logs and not the spares", len(got), got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, spareDir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("spare directory after Close: %v", err)
	}
	for i := range 10 {
		if _, err := os.Stat(s.path(fmt.Sprintf("job_%d", i))); err != nil {
			t.Error(err)
		}
	}
}

// TestSpareNeverReplacesALog: Get with create of a job whose log exists
// (a restarted service finishing a job) opens that log, output and all.
func TestSpareNeverReplacesALog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, _ := Open(dir)
	l, err := s.Get("job_x", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append(out(agentproto.FrameStdout, 0, "kept")); err != nil {
		t.Fatal(err)
	}
	s.Release("job_x")

	s2, _ := Open(dir)
	if err := s2.KeepSpares(2); err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	l2, err := s2.Get("job_x", true)
	if err != nil {
		t.Fatal(err)
	}
	if so, _, _ := l2.Offsets(); so != 4 {
		t.Errorf("stdout offset of the reopened log = %d, want 4", so)
	}
	if n := len(spareInodes(t, dir)); n != 2 {
		t.Errorf("%d spares left, want 2 (none taken)", n)
	}
	s2.Release("job_x")
}

// TestKeepSparesClearsLeftovers: spares a previous process left are
// removed, not adopted.
func TestKeepSparesClearsLeftovers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, spareDir), 0o700); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, spareDir, "stale")
	if err := os.WriteFile(stale, []byte("not empty"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, _ := Open(dir)
	if err := s.KeepSpares(1); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover spare: %v", err)
	}
	l, err := s.Get("job_y", true)
	if err != nil {
		t.Fatal(err)
	}
	if l.Size() != 0 {
		t.Errorf("new log of %d bytes, want 0", l.Size())
	}
	s.Release("job_y")
}
