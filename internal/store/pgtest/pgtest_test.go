package pgtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect %s: %v", dsn, err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func TestStartGivesFreshDatabases(t *testing.T) {
	t.Parallel()
	a, b := Start(t), Start(t)
	if a == b {
		t.Fatalf("two Starts returned the same DSN %s", a)
	}
	ca, cb := connect(t, a), connect(t, b)
	var dbA, dbB, addr string
	if err := ca.QueryRow(t.Context(), "SELECT current_database(), host(inet_server_addr())").Scan(&dbA, &addr); err != nil {
		t.Fatal(err)
	}
	if err := cb.QueryRow(t.Context(), "SELECT current_database()").Scan(&dbB); err != nil {
		t.Fatal(err)
	}
	if dbA == dbB {
		t.Errorf("both DSNs lead to database %s", dbA)
	}
	if addr != "127.0.0.1" {
		t.Errorf("server address = %s, want 127.0.0.1", addr)
	}
	if _, err := ca.Exec(t.Context(), "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := cb.QueryRow(t.Context(), "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Error("a table created in one database shows up in the other")
	}
}

func TestDatabaseDroppedAfterTest(t *testing.T) {
	t.Parallel()
	var name string
	t.Run("user", func(t *testing.T) {
		c := connect(t, Start(t))
		if err := c.QueryRow(t.Context(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
	})
	c := connect(t, Start(t))
	var n int
	if err := c.QueryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("database %s still exists after its test ended", name)
	}
}

// helperEnv makes the test binary play a test binary that dies without
// stopping its cluster.
const helperEnv = "GENESIS_PGTEST_ORPHAN_HELPER"

func TestHelperDiesWithCluster(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("helper process for TestClusterDiesWithTestBinary")
	}
	c, err := startCluster()
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(3)
	}
	fmt.Printf("cluster %d %s\n", c.cmd.Process.Pid, c.dir)
	os.Exit(0) // without c.stop: as when a test times out or is killed
}

// TestClusterDiesWithTestBinary checks the safety net: a postmaster whose
// test binary exits without stopping it shuts down by itself.
func TestClusterDiesWithTestBinary(t *testing.T) {
	t.Parallel()
	if _, err := binaries(); err != nil {
		t.Skipf("postgresql not available: %v", err)
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperDiesWithCluster$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var pid int
	var dir string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "cluster %d %s", &pid, &dir); err == nil {
			break
		}
	}
	if pid == 0 || !strings.Contains(dir, "genesis-pgtest-") {
		t.Fatalf("helper did not report its cluster:\n%s", out)
	}
	defer os.RemoveAll(dir)
	deadline := time.Now().Add(30 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("postmaster %d still running 30s after its test binary exited", pid)
		}
		time.Sleep(20 * time.Millisecond) // waiting for another process to exit; nothing to block on
	}
	// The next cluster made in that place sweeps the orphan's directory.
	sweepStale(filepath.Dir(dir))
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("orphaned cluster directory %s not swept: %v", dir, err)
	}
}
