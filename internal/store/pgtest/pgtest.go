package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// startTimeout bounds initdb plus the postmaster's start.
	startTimeout = 60 * time.Second
	// stopTimeout is how long a fast shutdown may take before SIGKILL.
	stopTimeout = 15 * time.Second
	// superuser is the bootstrap role initdb creates.
	superuser = "postgres"
)

// errNoBinaries means PostgreSQL is not installed.
var errNoBinaries = errors.New("PostgreSQL binaries (initdb, postgres) not found in /usr/lib/postgresql/*/bin or on PATH")

// The cluster of this test binary.
var (
	mainActive atomic.Bool
	once       sync.Once
	shared     *cluster
	sharedErr  error
	dbSeq      atomic.Int64
)

// Main runs the tests of m and then stops the cluster, if a test started one,
// and removes its directory. It returns the exit code for os.Exit.
func Main(m *testing.M) int {
	mainActive.Store(true)
	code := m.Run()
	mainActive.Store(false)
	if shared != nil {
		if err := shared.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Start returns the DSN of a new, empty database in the binary's cluster,
// starting the cluster on first use. The database is dropped when t ends.
func Start(t testing.TB) (dsn string) {
	t.Helper()
	if !mainActive.Load() {
		t.Fatal("pgtest.Start needs pgtest.Main to run the tests, so that the cluster is stopped afterwards: " +
			"add func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }")
	}
	once.Do(func() { shared, sharedErr = startCluster() })
	if errors.Is(sharedErr, errNoBinaries) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pgtest: %v (CI=true: PostgreSQL is required)", sharedErr)
		}
		t.Skipf("postgresql not available: %v", sharedErr)
	}
	if sharedErr != nil {
		t.Fatalf("pgtest: %v", sharedErr)
	}
	name := fmt.Sprintf("test_%d", dbSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := shared.admin(ctx, shared.createDatabase(name)); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := shared.admin(ctx, shared.dropDatabase(name)); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return shared.dsn(name)
}

// cluster is a running postmaster and its directory.
type cluster struct {
	dir     string // temporary directory: data/, the socket, postgres.log
	port    int
	version int // server_version_num, e.g. 150013
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the postmaster has exited

	adminMu   sync.Mutex
	adminConn *pgx.Conn // see admin
}

// createDatabase returns the statement that creates a database. From
// PostgreSQL 15 on, FILE_COPY (copy the template's files) is several times
// faster for a small template than the default WAL_LOG.
func (c *cluster) createDatabase(name string) string {
	if c.version >= 150000 {
		return "CREATE DATABASE " + name + " STRATEGY FILE_COPY"
	}
	return "CREATE DATABASE " + name
}

// dropDatabase returns the statement that drops a database, ending its
// sessions first where the server can (PostgreSQL 13 on).
func (c *cluster) dropDatabase(name string) string {
	if c.version >= 130000 {
		return "DROP DATABASE " + name + " WITH (FORCE)"
	}
	return "DROP DATABASE " + name
}

// baseDir is where clusters are made: /dev/shm when it is there (a memory
// file system makes initdb and CREATE DATABASE much faster), else the
// temporary directory.
func baseDir() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() && fi.Mode().Perm()&0o003 == 0o003 {
		return "/dev/shm"
	}
	return os.TempDir()
}

func (c *cluster) dsn(database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(superuser),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// readVersion connects and reads the server's version number.
func (c *cluster) readVersion(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.dsn("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var v string
	if err := conn.QueryRow(ctx, "SHOW server_version_num").Scan(&v); err != nil {
		return err
	}
	c.version, err = strconv.Atoi(v)
	return err
}

// admin runs one statement in the "postgres" database, on one connection
// kept for the cluster's life (a new connection costs the server a process).
func (c *cluster) admin(ctx context.Context, sql string) error {
	c.adminMu.Lock()
	defer c.adminMu.Unlock()
	if c.adminConn == nil || c.adminConn.IsClosed() {
		conn, err := pgx.Connect(ctx, c.dsn("postgres"))
		if err != nil {
			return err
		}
		c.adminConn = conn
	}
	_, err := c.adminConn.Exec(ctx, sql)
	return err
}

// binaries returns the directory holding initdb and postgres: the newest
// /usr/lib/postgresql/N/bin that has both, else the directory of initdb on
// PATH.
func binaries() (string, error) {
	has := func(dir string) bool {
		for _, name := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(dir string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(dir)), 64)
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int { return int(version(b)*100 - version(a)*100) })
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && has(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
		if has(filepath.Dir(p)) {
			return filepath.Dir(p), nil
		}
	}
	return "", errNoBinaries
}

// runAs returns the credentials to run PostgreSQL with: none when the
// process is not root, else the "postgres" user or "nobody".
func runAs() (*syscall.Credential, string, error) {
	if os.Geteuid() != 0 {
		return nil, "", nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, name, nil
	}
	return nil, "", errors.New("running as root and neither a postgres nor a nobody user exists to run PostgreSQL as")
}

// startCluster creates a cluster in a new temporary directory and starts it.
func startCluster() (_ *cluster, err error) {
	bin, err := binaries()
	if err != nil {
		return nil, err
	}
	cred, userName, err := runAs()
	if err != nil {
		return nil, err
	}
	base := baseDir()
	sweepStale(base)
	dir, err := os.MkdirTemp(base, dirPrefix)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("hand %s to user %s: %w", dir, userName, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()

	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", superuser,
		"--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Dir = dir // the test's directory may not be readable by the cluster's user
	initdb.Env = childEnv()
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb (as %s) in %s: %w\n%s", orDefault(userName, "the current user"), dir, err, out)
	}

	// A free port can be taken between our probe and the postmaster's bind:
	// try a few.
	var lastErr error
	for range 3 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		c := &cluster{dir: dir, port: port, exited: make(chan struct{})}
		if lastErr = c.start(ctx, bin, cred); lastErr == nil {
			return c, nil
		}
	}
	return nil, lastErr
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

const (
	// dirPrefix starts the name of every cluster directory.
	dirPrefix = "genesis-pgtest-"
	// ownerFile in a cluster directory holds the PID of its test binary.
	ownerFile = "owner.pid"
)

// sweepStale removes the cluster directories in base left behind by test
// binaries that died without stopping their cluster: those whose owner and
// postmaster are both gone. A directory without an owner file is being set
// up, unless it is an hour old.
func sweepStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, dirPrefix+"*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			if fi, serr := os.Stat(dir); serr != nil || time.Since(fi.ModTime()) < time.Hour {
				continue
			}
		} else if owner, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || alive(owner) {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid")); err == nil {
			first, _, _ := strings.Cut(string(b), "\n")
			if pid, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && alive(pid) {
				continue // still shutting down
			}
		}
		os.RemoveAll(dir)
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) // unreadable (hidepid): assume it lives
	}
	// The state follows the parenthesized command name.
	st := string(b)
	i := strings.LastIndexByte(st, ')')
	return i < 0 || i+2 >= len(st) || st[i+2] != 'Z'
}

// childEnv is the environment of initdb and postgres.
func childEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "LC_ALL=C", "TZ=UTC"}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs the postmaster and waits until it accepts connections.
func (c *cluster) start(ctx context.Context, bin string, cred *syscall.Credential) error {
	logPath := filepath.Join(c.dir, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child has its own copy
	c.cmd = exec.Command(filepath.Join(bin, "postgres"),
		"-D", filepath.Join(c.dir, "data"),
		"-k", c.dir,
		"-c", "listen_addresses=127.0.0.1",
		"-p", strconv.Itoa(c.port),
		// A throwaway cluster: durability off, room for parallel tests.
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "max_connections=300",
		"-c", "shared_buffers=32MB",
		"-c", "dynamic_shared_memory_type=mmap",
		"-c", "max_wal_size=256MB",
	)
	c.cmd.Dir = c.dir
	c.cmd.Env = childEnv()
	c.cmd.Stdout, c.cmd.Stderr = logFile, logFile
	// SIGQUIT (immediate shutdown) when the test binary dies before Main
	// stops the cluster. The parent-death signal follows the thread that
	// forked, so the fork happens on a thread locked for the postmaster's
	// whole life.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := c.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = c.cmd.Wait()
		close(c.exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	for {
		select {
		case <-c.exited:
			return fmt.Errorf("postgres exited during start-up on port %d: %s", c.port, tail(logPath))
		case <-ctx.Done():
			_ = c.kill()
			return fmt.Errorf("postgres not ready within %v on port %d: %s", startTimeout, c.port, tail(logPath))
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.readVersion(pctx)
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond) // polling a starting server; there is no event to wait for
	}
}

// stop shuts the postmaster down and removes the cluster's directory.
func (c *cluster) stop() error {
	c.adminMu.Lock()
	if c.adminConn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = c.adminConn.Close(ctx)
		cancel()
	}
	c.adminMu.Unlock()
	return errors.Join(c.kill(), os.RemoveAll(c.dir))
}

// kill shuts the postmaster down (fast shutdown, then SIGKILL) and waits
// until it has exited; its backends exit with it.
func (c *cluster) kill() error {
	select {
	case <-c.exited:
		return nil
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.exited:
		return nil
	case <-time.After(stopTimeout):
		_ = c.cmd.Process.Kill()
		<-c.exited
		return fmt.Errorf("postgres did not stop within %v; killed", stopTimeout)
	}
}

// tail returns the end of the postmaster's log.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	const max = 2000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(bytes.TrimSpace(b))
}
