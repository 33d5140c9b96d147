package sqlstore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for raw access

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/store/pgtest"
	"genesis.dev/sandbox/internal/store/postgres"
	"genesis.dev/sandbox/internal/store/sqlite"
	"genesis.dev/sandbox/internal/store/sqlstore"
	"genesis.dev/sandbox/internal/tenant"
)

// backend is one database the store runs on, with what the tests need to
// reach it behind the store's back; also as the releases before the single
// schema history left it: the old migration files of that backend (kept
// under testdata/legacy), applied the way its old runner applied them, and
// rows in its stored forms.
type backend struct {
	name string
	// newDB returns an empty database: the raw handle and the target the
	// store opens.
	newDB func(t testing.TB) (db *sql.DB, target string)
	open  func(ctx context.Context, target string) (*sqlstore.Store, error)
	// openSingle opens the store on one connection.
	openSingle func(ctx context.Context, target string) (*sqlstore.Store, error)
	// createVersions and recordVersion are the old runner's statements.
	createVersions, recordVersion string
	// rebind turns "?" placeholders into the database's.
	rebind func(string) string
	// encodeTime and encodeBool are the old stored forms.
	encodeTime func(time.Time) any
	encodeBool func(bool) any
	// schema describes the database's tables, columns, indexes and
	// constraints, to compare a bridged schema with a new one.
	schema func(t *testing.T, db *sql.DB) []string
}

func sqliteBackend() backend {
	return backend{
		name: "sqlite",
		newDB: func(t testing.TB) (*sql.DB, string) {
			p := filepath.Join(t.TempDir(), "genesis.db")
			db, err := sql.Open("sqlite", p+"?_busy_timeout=5000&_foreign_keys=on")
			if err != nil {
				t.Fatal(err)
			}
			db.SetMaxOpenConns(1)
			t.Cleanup(func() { db.Close() })
			return db, p
		},
		open: func(ctx context.Context, p string) (*sqlstore.Store, error) {
			return sqlite.Open(ctx, sqlite.Config{Path: p})
		},
		openSingle: func(ctx context.Context, p string) (*sqlstore.Store, error) {
			return sqlite.Open(ctx, sqlite.Config{Path: p}) // one write connection
		},
		createVersions: `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER NOT NULL PRIMARY KEY,
			applied_at TEXT    NOT NULL
		) STRICT`,
		recordVersion: "INSERT INTO schema_migrations (version, applied_at) VALUES (?, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
		rebind:        func(q string) string { return q },
		encodeTime:    func(t time.Time) any { return t.UTC().Format(sqlstore.TextTimeLayout) },
		encodeBool: func(b bool) any {
			if b {
				return 1
			}
			return 0
		},
		schema: sqliteSchema,
	}
}

func postgresBackend() backend {
	return backend{
		name: "postgres",
		newDB: func(t testing.TB) (*sql.DB, string) {
			dsn := pgtest.Start(t)
			db, err := sql.Open("pgx", dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db, dsn
		},
		open: func(ctx context.Context, dsn string) (*sqlstore.Store, error) {
			// Few connections, so that parallel tests stay within the test
			// cluster's max_connections.
			return postgres.Open(ctx, postgres.Config{DSN: dsn, MaxConns: 4})
		},
		openSingle: func(ctx context.Context, dsn string) (*sqlstore.Store, error) {
			return postgres.Open(ctx, postgres.Config{DSN: dsn, MaxConns: 1})
		},
		createVersions: `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER     NOT NULL PRIMARY KEY,
			applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
		)`,
		recordVersion: "INSERT INTO schema_migrations (version) VALUES (?)",
		rebind: func(q string) string {
			var b strings.Builder
			n := 0
			for _, r := range q {
				if r == '?' {
					n++
					fmt.Fprintf(&b, "$%d", n)
					continue
				}
				b.WriteRune(r)
			}
			return b.String()
		},
		encodeTime: func(t time.Time) any { return t.UnixNano() },
		encodeBool: func(b bool) any { return b },
		schema:     postgresSchema,
	}
}

func backends() []backend { return []backend{sqliteBackend(), postgresBackend()} }

// applyLegacy applies the old migrations 1..upTo of the backend, each in a
// transaction with its schema_migrations row, as the old runner did.
func (b backend) applyLegacy(t *testing.T, db *sql.DB, upTo int) {
	t.Helper()
	ctx := t.Context()
	if _, err := db.ExecContext(ctx, b.createVersions); err != nil {
		t.Fatal(err)
	}
	dir := path.Join("testdata", "legacy", b.name)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	applied := 0
	for _, e := range entries {
		var v int
		if _, err := fmt.Sscanf(e.Name(), "%04d_", &v); err != nil || v > upTo {
			continue
		}
		body, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			t.Fatalf("old migration %s: %v", e.Name(), err)
		}
		if _, err := tx.ExecContext(ctx, b.rebind(b.recordVersion), v); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		applied++
	}
	if applied != upTo {
		t.Fatalf("applied %d old migrations of %s, want %d", applied, b.name, upTo)
	}
}

// The records the old release wrote.
var (
	t0      = time.Date(2025, 6, 7, 8, 9, 10, 123456789, time.UTC)
	expires = t0.Add(time.Hour)

	oldSandbox = &sandbox.Sandbox{
		ID: "sbx_old", Tenant: "acme", Profile: "code-python-basic", Runtime: sandbox.RuntimeRunc,
		RiskLevel: sandbox.RiskLow, State: sandbox.StateLeased, Image: "genesis/code-python-basic:1",
		Resources: sandbox.Resources{CPU: 1, MemoryMB: 256, Pids: 64},
		Env:       map[string]string{"A": "1"}, Metadata: map[string]string{"k": "v"},
		ContainerID: "c0ffee", ResourceVersion: 3, CreatedAt: t0, UpdatedAt: t0.Add(time.Second),
		ExpiresAt: &expires, Instance: "inst-1",
	}
	poolSandbox = &sandbox.Sandbox{
		ID: "sbx_pool", Profile: "code-python-basic", Runtime: sandbox.RuntimeRunc,
		RiskLevel: sandbox.RiskLow, State: sandbox.StateIdle, Image: "genesis/code-python-basic:1",
		Resources: sandbox.Resources{CPU: 1, MemoryMB: 256, Pids: 64}, ResourceVersion: 1,
		CreatedAt: t0, UpdatedAt: t0, Instance: "inst-1",
	}
	exitCode = 0
	finished = t0.Add(3 * time.Second)
	started  = t0.Add(2 * time.Second)
	oldJob   = &sandbox.Job{
		ID: "job_old", Tenant: "acme", SandboxID: "sbx_old", Command: []string{"echo", "hi"}, Cwd: "/workspace",
		State: sandbox.JobSucceeded, ExitCode: &exitCode, ExitReason: sandbox.ExitExited,
		StdoutBytes: 3, StdoutTruncated: true, TimeoutMS: 30000, Mode: sandbox.JobModeBackground,
		CreatedAt: t0, StartedAt: &started, FinishedAt: &finished,
	}
	oldSession = &sandbox.Session{ID: "ses_old", Tenant: "acme", SandboxID: "sbx_old", Kind: sandbox.SessionShell,
		State: sandbox.SessionActive, Cwd: "/workspace", Runs: 2, CreatedAt: t0, UpdatedAt: t0}
	oldTenant = &tenant.Tenant{Name: "acme", Weight: 2, Admin: true, Source: tenant.SourceAPI,
		ResourceVersion: 4, CreatedAt: t0, UpdatedAt: t0.Add(time.Minute)}
	oldKey = &tenant.Key{ID: "key_old", Tenant: "acme", Prefix: "gsk_abcd", Description: "ci",
		Hash: [32]byte{1, 2, 3, 31: 9}, CreatedAt: t0, RevokedAt: &finished}
	oldAudit = []*tenant.AuditRecord{
		{Time: t0, Actor: "key_old", Tenant: "acme", Action: "POST /v1/sandboxes", Target: "sbx_old", Status: 201, RequestID: "r1", Remote: "127.0.0.1"},
		{Time: t0.Add(time.Second), Actor: "anonymous", Action: "GET /v1/sandboxes", Status: 401, Code: "unauthenticated", RequestID: "r2"},
	}
	oldNetwork = &sandbox.Network{SandboxID: "sbx_old", Tenant: "acme", Status: sandbox.NetworkStatus("active"),
		GatewayIP: "10.0.0.1", ResourceVersion: 2, UpdatedAt: t0}
	oldEvents = []sandbox.NetworkEvent{
		{SandboxID: "sbx_old", Time: t0, Name: "pypi.org", Port: 443, Proto: "tcp", Decision: "allow", BytesUp: 10, BytesDown: 20},
		{SandboxID: "sbx_old", Time: t0.Add(time.Second), Address: "203.0.113.9", Port: 80, Proto: "tcp", Decision: "deny", Reason: "not allowed"},
	}
	oldArtifact = &sandbox.Artifact{ID: "art_old", Tenant: "acme", JobID: "job_old", SandboxID: "sbx_old",
		Path: "out/a.txt", Name: "a.txt", Size: 5, SHA256: strings.Repeat("ab", 32), MIME: "text/plain",
		CreatedAt: t0, ExpiresAt: t0.Add(24 * time.Hour)}
	oldCollection = &sandbox.ArtifactCollection{JobID: "job_old", Tenant: "acme", SandboxID: "sbx_old",
		Spec: sandbox.ArtifactSpec{Paths: []string{"out/*"}}, State: sandbox.ArtifactsDone, Collected: 1,
		CollectedBytes: 5, CreatedAt: t0, FinishedAt: &finished, ExpiresAt: t0.Add(24 * time.Hour)}
	oldLease = &sandbox.Lease{ID: "lse_old", Tenant: "acme", SandboxID: "sbx_old", Profile: "code-python-basic",
		Runtime: sandbox.RuntimeRunc, State: sandbox.LeaseActive, Warm: true, Metadata: map[string]string{"k": "v"},
		TTLSeconds: 3600, ResourceVersion: 1, CreatedAt: t0, RenewedAt: t0, ExpiresAt: expires}
)

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// writeLegacyRows inserts the old records in the old stored forms.
func (b backend) writeLegacyRows(t *testing.T, db *sql.DB) {
	t.Helper()
	ctx := t.Context()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, b.rebind(q), args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	tm := b.encodeTime
	for _, sb := range []*sandbox.Sandbox{oldSandbox, poolSandbox} {
		var env, md, exp any
		if sb.Env != nil {
			env, md = mustJSON(t, sb.Env), mustJSON(t, sb.Metadata)
		}
		if sb.ExpiresAt != nil {
			exp = tm(*sb.ExpiresAt)
		}
		exec(`INSERT INTO sandboxes (id, tenant, profile, runtime, risk_level, state, image, resources, env, metadata,
			container_id, failure_reason, resource_version, created_at, updated_at, expires_at, instance)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			sb.ID, sb.Tenant, sb.Profile, string(sb.Runtime), string(sb.RiskLevel), string(sb.State), sb.Image,
			mustJSON(t, sb.Resources), env, md, sb.ContainerID, sb.FailureReason, sb.ResourceVersion,
			tm(sb.CreatedAt), tm(sb.UpdatedAt), exp, sb.Instance)
	}
	j := oldJob
	exec(`INSERT INTO jobs (id, tenant, sandbox_id, command, script, cwd, state, exit_code, exit_reason, signal, error,
		stdout_bytes, stderr_bytes, stdout_truncated, stderr_truncated, timeout_ms, created_at, started_at, finished_at, mode)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		j.ID, j.Tenant, j.SandboxID, mustJSON(t, j.Command), j.Script, j.Cwd, string(j.State), *j.ExitCode,
		string(j.ExitReason), j.Signal, j.Error, j.StdoutBytes, j.StderrBytes, b.encodeBool(j.StdoutTruncated),
		b.encodeBool(j.StderrTruncated), j.TimeoutMS, tm(j.CreatedAt), tm(*j.StartedAt), tm(*j.FinishedAt), string(j.Mode))
	exec(`INSERT INTO sessions (id, tenant, sandbox_id, doc) VALUES (?, ?, ?, ?)`,
		oldSession.ID, oldSession.Tenant, oldSession.SandboxID, mustJSON(t, oldSession))
	exec(`INSERT INTO tenants (name, doc, resource_version, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
		oldTenant.Name, mustJSON(t, oldTenant), oldTenant.ResourceVersion, tm(oldTenant.CreatedAt), tm(oldTenant.UpdatedAt))
	exec(`INSERT INTO api_keys (id, tenant, hash, prefix, description, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		oldKey.ID, oldKey.Tenant, oldKey.Hash[:], oldKey.Prefix, oldKey.Description, tm(oldKey.CreatedAt), tm(*oldKey.RevokedAt))
	for _, r := range oldAudit {
		exec(`INSERT INTO audit (time, actor, tenant, action, target, status, code, request_id, remote) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			tm(r.Time), r.Actor, r.Tenant, r.Action, r.Target, r.Status, r.Code, r.RequestID, r.Remote)
	}
	exec(`INSERT INTO sandbox_networks (sandbox_id, tenant, status, resource_version, doc) VALUES (?, ?, ?, ?, ?)`,
		oldNetwork.SandboxID, oldNetwork.Tenant, string(oldNetwork.Status), oldNetwork.ResourceVersion, mustJSON(t, oldNetwork))
	for _, e := range oldEvents {
		exec(`INSERT INTO network_events (sandbox_id, time, name, address, port, proto, decision, reason, bytes_up, bytes_down)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.SandboxID, tm(e.Time), e.Name, e.Address, e.Port, e.Proto, e.Decision, e.Reason, e.BytesUp, e.BytesDown)
	}
	exec(`INSERT INTO artifacts (id, tenant, job_id, sha256, expires_at, doc) VALUES (?, ?, ?, ?, ?, ?)`,
		oldArtifact.ID, oldArtifact.Tenant, oldArtifact.JobID, oldArtifact.SHA256, tm(oldArtifact.ExpiresAt), mustJSON(t, oldArtifact))
	exec(`INSERT INTO artifact_collections (job_id, tenant, expires_at, doc) VALUES (?, ?, ?, ?)`,
		oldCollection.JobID, oldCollection.Tenant, tm(oldCollection.ExpiresAt), mustJSON(t, oldCollection))
	exec(`INSERT INTO leases (id, tenant, sandbox_id, state, expires_at, created_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		oldLease.ID, oldLease.Tenant, oldLease.SandboxID, string(oldLease.State), tm(oldLease.ExpiresAt), tm(oldLease.CreatedAt), mustJSON(t, oldLease))
}

func schemaVersions(t *testing.T, db *sql.DB) []int {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SELECT version FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var vs []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return vs
}

func check(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s after the bridge:\n got %+v\nwant %+v", what, got, want)
	}
}

// TestBridgeKeepsData opens a database made by the previous release's
// schema history and rows with the single-history store: the bridge marks
// it at the baseline, every record reads back as it was written, and the
// store works on it (a claim, an update, an audit append).
func TestBridgeKeepsData(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db, target := b.newDB(t)
			b.applyLegacy(t, db, legacyVersion(b))
			b.writeLegacyRows(t, db)

			s, err := b.open(ctx, target)
			if err != nil {
				t.Fatalf("Open of the old database: %v", err)
			}
			defer s.Close()
			want := append(legacyVersions(b), 8)
			if vs := schemaVersions(t, db); !slices.Equal(vs[:len(want)], want) {
				t.Errorf("schema_migrations versions = %v, want %v then the later steps", vs, want)
			}

			sb, err := s.GetSandbox(ctx, "acme", "sbx_old")
			if err != nil {
				t.Fatal(err)
			}
			check(t, "sandbox", sb, oldSandbox)
			j, err := s.GetJob(ctx, "acme", "job_old")
			if err != nil {
				t.Fatal(err)
			}
			check(t, "job", j, oldJob)
			se, err := s.GetSession(ctx, "acme", "ses_old")
			if err != nil {
				t.Fatal(err)
			}
			check(t, "session", se, oldSession)
			tn, err := s.GetTenant(ctx, "acme")
			if err != nil {
				t.Fatal(err)
			}
			check(t, "tenant", tn, oldTenant)
			k, err := s.KeyByHash(ctx, oldKey.Hash)
			if err != nil {
				t.Fatal(err)
			}
			check(t, "key", k, oldKey)
			recs, err := s.ListAudit(ctx, store.AuditFilter{})
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range recs {
				if r.Seq <= 0 || (i > 0 && r.Seq <= recs[i-1].Seq) {
					t.Errorf("audit seq %d after %v", r.Seq, recs[:i])
				}
				r.Seq = 0
			}
			check(t, "audit", recs, oldAudit)
			n, err := s.GetSandboxNetwork(ctx, "acme", "sbx_old")
			if err != nil {
				t.Fatal(err)
			}
			check(t, "network", n, oldNetwork)
			evs, err := s.ListNetworkEvents(ctx, "sbx_old", 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			for i := range evs {
				evs[i].Cursor = 0
			}
			check(t, "network events", evs, oldEvents)
			a, err := s.GetArtifact(ctx, "acme", "art_old")
			if err != nil {
				t.Fatal(err)
			}
			check(t, "artifact", a, oldArtifact)
			c, err := s.GetArtifactCollection(ctx, "acme", "job_old")
			if err != nil {
				t.Fatal(err)
			}
			check(t, "artifact collection", c, oldCollection)
			l, err := s.GetLease(ctx, "acme", "lse_old")
			if err != nil {
				t.Fatal(err)
			}
			check(t, "lease", l, oldLease)
			counts, err := s.CountSandboxesByState(ctx)
			if err != nil {
				t.Fatal(err)
			}
			check(t, "counts", counts, map[sandbox.State]int{sandbox.StateLeased: 1, sandbox.StateIdle: 1})

			// The store writes to the bridged schema as to a new one.
			nl := &sandbox.Lease{ID: "lse_new", Tenant: "beta", State: sandbox.LeaseActive,
				CreatedAt: t0, RenewedAt: t0, ExpiresAt: expires}
			if _, claimed, err := s.ClaimSandbox(ctx, store.Claim{Lease: nl, Profile: "code-python-basic",
				Runtime: sandbox.RuntimeRunc, Instance: "inst-1", Now: t0}); err != nil || claimed.ID != "sbx_pool" {
				t.Errorf("ClaimSandbox from the old pool = %v, %v; want sbx_pool", claimed, err)
			}
			if _, _, err := s.ClaimSandbox(ctx, store.Claim{Lease: &sandbox.Lease{ID: "lse_dup", Tenant: "acme",
				State: sandbox.LeaseActive, ExpiresAt: expires}, SandboxID: "sbx_old", Now: t0}); !errors.Is(err, errdefs.ErrConflict) {
				t.Errorf("second lease of sbx_old: err = %v, want ErrConflict", err)
			}
			if _, err := s.UpdateJob(ctx, "job_old", func(j *sandbox.Job) error {
				j.Mode, j.StderrBytes = sandbox.JobModeSync, 9
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if j, err := s.GetJob(ctx, "", "job_old"); err != nil || j.Mode != sandbox.JobModeBackground || j.StderrBytes != 9 {
				t.Errorf("job after update = %+v, %v; want mode kept and stderr_bytes 9", j, err)
			}
			r := &tenant.AuditRecord{Time: t0.Add(time.Minute), Actor: "system", Action: "system ttl_expired", Status: 200}
			if err := s.AppendAudit(ctx, r); err != nil || r.Seq <= recs[len(recs)-1].Seq {
				t.Errorf("AppendAudit after the bridge: seq %d, %v; want after %d", r.Seq, err, recs[len(recs)-1].Seq)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}

			// A second open finds nothing to do.
			s2, err := b.open(ctx, target)
			if err != nil {
				t.Fatalf("reopen after the bridge: %v", err)
			}
			s2.Close()
			if vs := schemaVersions(t, db); !slices.Equal(vs[:len(want)], want) || slices.Index(vs, 8) != len(want)-1 {
				t.Errorf("schema_migrations versions after reopen = %v", vs)
			}
		})
	}
}

// TestBridgedSchemaMatchesNew compares the schema of a database bridged
// from the old history with that of a new database: tables, column types,
// defaults, indexes and constraints must be the same, so that later steps
// of the single history apply to both alike.
func TestBridgedSchemaMatchesNew(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			oldDB, oldTarget := b.newDB(t)
			b.applyLegacy(t, oldDB, legacyVersion(b))
			newDB, newTarget := b.newDB(t)
			for _, target := range []string{oldTarget, newTarget} {
				s, err := b.open(ctx, target)
				if err != nil {
					t.Fatal(err)
				}
				s.Close()
			}
			got, want := b.schema(t, oldDB), b.schema(t, newDB)
			if len(want) < 20 {
				t.Fatalf("schema description of a new database has only %d lines: %v", len(want), want)
			}
			for _, line := range want {
				if !slices.Contains(got, line) {
					t.Errorf("bridged database lacks: %s", line)
				}
			}
			for _, line := range got {
				if !slices.Contains(want, line) {
					t.Errorf("bridged database has, unlike a new one: %s", line)
				}
			}
		})
	}
}

// TestRefusesPartOfOldHistory: a database part way through an old history
// is refused (it must be finished by the release that used it), and left
// unchanged.
func TestRefusesPartOfOldHistory(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			db, target := b.newDB(t)
			b.applyLegacy(t, db, 3)
			s, err := b.open(t.Context(), target)
			if err == nil {
				s.Close()
				t.Fatal("Open of a database at old version 3 succeeded, want refusal")
			}
			if !errors.Is(err, errdefs.ErrFailedPrecondition) || errdefs.Code(err) != "schema_too_old" {
				t.Errorf("Open error = %v (code %q), want ErrFailedPrecondition with code schema_too_old", err, errdefs.Code(err))
			}
			if vs := schemaVersions(t, db); !slices.Equal(vs, []int{1, 2, 3}) {
				t.Errorf("schema_migrations versions = %v after the refusal, want [1 2 3]", vs)
			}
		})
	}
}

func legacyVersion(b backend) int {
	if b.name == "sqlite" {
		return 7
	}
	return 5
}

func legacyVersions(b backend) []int {
	var vs []int
	for v := 1; v <= legacyVersion(b); v++ {
		vs = append(vs, v)
	}
	return vs
}

func queryLines(t *testing.T, db *sql.DB, q string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = cols[i] + "=" + v.String
			if !v.Valid {
				parts[i] = cols[i] + "=NULL"
			}
		}
		out = append(out, strings.Join(parts, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sqliteSchema(t *testing.T, db *sql.DB) []string {
	var out []string
	tables := queryLines(t, db, `SELECT name, strict FROM pragma_table_list WHERE schema = 'main' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	out = append(out, tables...)
	for _, line := range tables {
		name := strings.TrimPrefix(strings.Fields(line)[0], "name=")
		for _, c := range queryLines(t, db, `SELECT cid, name, type, "notnull", dflt_value, pk FROM pragma_table_info(?) ORDER BY cid`, name) {
			out = append(out, name+": "+c)
		}
		for _, fk := range queryLines(t, db, `SELECT "table", "from", "to", on_delete FROM pragma_foreign_key_list(?) ORDER BY "from"`, name) {
			out = append(out, name+" fk: "+fk)
		}
	}
	for _, ix := range queryLines(t, db, `SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' ORDER BY name`) {
		out = append(out, strings.Join(strings.Fields(ix), " "))
	}
	return out
}

func postgresSchema(t *testing.T, db *sql.DB) []string {
	var out []string
	out = append(out, queryLines(t, db, `SELECT table_name, ordinal_position, column_name, data_type, is_nullable,
		column_default, is_identity, identity_generation FROM information_schema.columns
		WHERE table_schema = 'public' ORDER BY table_name, ordinal_position`)...)
	out = append(out, queryLines(t, db, `SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY indexname`)...)
	out = append(out, queryLines(t, db, `SELECT conrelid::regclass::text AS tbl, conname, pg_get_constraintdef(oid) AS def
		FROM pg_constraint WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2`)...)
	return out
}

// TestLaterStepAppliesToBridgedAndNew: a step after the baseline runs on a
// bridged database and on a new one alike, once, and a build without it
// refuses the database afterwards.
func TestLaterStepAppliesToBridgedAndNew(t *testing.T) {
	t.Parallel()
	baseline, err := fs.ReadFile(sqlstore.MigrationFS, "migrations/0008_baseline.sql")
	if err != nil {
		t.Fatal(err)
	}
	next := fstest.MapFS{
		"migrations/0008_baseline.sql": {Data: baseline},
		"migrations/0009_note.sql": {Data: []byte(`ALTER TABLE sandboxes ADD COLUMN note TEXT NOT NULL DEFAULT '';
CREATE INDEX sandboxes_note ON sandboxes (note{{.SeqKey}});`)},
	}
	for _, b := range backends() {
		for _, bridged := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/bridged=%v", b.name, bridged), func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				db, target := b.newDB(t)
				if bridged {
					b.applyLegacy(t, db, legacyVersion(b))
					b.writeLegacyRows(t, db)
				}
				s, err := b.open(ctx, target)
				if err != nil {
					t.Fatal(err)
				}
				for range 2 { // the second run finds nothing to do
					if err := sqlstore.MigrateFrom(ctx, s, next); err != nil {
						t.Fatalf("migrate to 9: %v", err)
					}
				}
				s.Close()
				vs := schemaVersions(t, db)
				if got := vs[len(vs)-2:]; !slices.Equal(got, []int{8, 9}) {
					t.Errorf("schema_migrations versions = %v, want … 8 9", vs)
				}
				var notes int
				if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM sandboxes WHERE note = ''").Scan(&notes); err != nil {
					t.Errorf("the step's column: %v", err)
				} else if bridged && notes != 2 {
					t.Errorf("old sandboxes with the new column's default: %d, want 2", notes)
				}
				if s, err = b.open(ctx, target); err == nil {
					s.Close()
				}
				if errdefs.Code(err) != "schema_too_new" {
					t.Errorf("Open by a build that knows only the baseline: err = %v, want code schema_too_new", err)
				}
			})
		}
	}
}
