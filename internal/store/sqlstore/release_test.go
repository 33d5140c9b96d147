package sqlstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"genesis.dev/sandbox/internal/errdefs"
	"genesis.dev/sandbox/internal/sandbox"
	"genesis.dev/sandbox/internal/store"
	"genesis.dev/sandbox/internal/store/sqlstore"
	"genesis.dev/sandbox/internal/tenant"
)

// releaseRecords is testdata/release/release.json: records written through
// the store of the release before the single schema history, as that
// store read them back (the same on SQLite and PostgreSQL), made with the
// store of commit b3d5b71. Its databases are testdata/release/sqlite.sql
// and postgres.sql, dumps taken right after. ContainerID, Instance and key hashes are not in the JSON form of
// the records; the test checks them apart.
type releaseRecords struct {
	Sandboxes     []*sandbox.Sandbox            `json:"sandboxes"`
	Jobs          []*sandbox.Job                `json:"jobs"`
	Sessions      []*sandbox.Session            `json:"sessions"`
	Tenants       []*tenant.Tenant              `json:"tenants"`
	Keys          []*tenant.Key                 `json:"keys"`
	KeyHashes     []string                      `json:"key_hashes"`
	Audit         []*tenant.AuditRecord         `json:"audit"`
	Networks      []*sandbox.Network            `json:"networks"`
	NetworkEvents []sandbox.NetworkEvent        `json:"network_events"`
	Artifacts     []*sandbox.Artifact           `json:"artifacts"`
	Collections   []*sandbox.ArtifactCollection `json:"collections"`
	Leases        []*sandbox.Lease              `json:"leases"`
}

// readRecords reads what the release fixture holds through s, as the old
// release did to make release.json.
func readRecords(ctx context.Context, s *sqlstore.Store) (*releaseRecords, error) {
	var r releaseRecords
	var err error
	if r.Sandboxes, err = s.ListSandboxes(ctx, store.SandboxFilter{}); err != nil {
		return nil, err
	}
	if r.Jobs, err = s.ListJobs(ctx, store.JobFilter{}); err != nil {
		return nil, err
	}
	if r.Sessions, err = s.ListSandboxSessions(ctx, "sbx_old"); err != nil {
		return nil, err
	}
	if r.Tenants, err = s.ListTenants(ctx); err != nil {
		return nil, err
	}
	if r.Keys, err = s.ListKeys(ctx, "acme"); err != nil {
		return nil, err
	}
	for _, k := range r.Keys {
		r.KeyHashes = append(r.KeyHashes, hex.EncodeToString(k.Hash[:]))
	}
	if r.Audit, err = s.ListAudit(ctx, store.AuditFilter{}); err != nil {
		return nil, err
	}
	if r.Networks, err = s.ListSandboxNetworks(ctx); err != nil {
		return nil, err
	}
	if r.NetworkEvents, err = s.ListNetworkEvents(ctx, "sbx_old", 0, 100); err != nil {
		return nil, err
	}
	if r.Artifacts, err = s.ListArtifacts(ctx, "", "job_old"); err != nil {
		return nil, err
	}
	c, err := s.GetArtifactCollection(ctx, "", "job_old")
	if err != nil {
		return nil, err
	}
	r.Collections = []*sandbox.ArtifactCollection{c}
	if r.Leases, err = s.ListLeases(ctx, store.LeaseFilter{}); err != nil {
		return nil, err
	}
	return &r, nil
}

// loadRelease loads the backend's release database (a dump) into db, on a
// connection of its own (a dump may change session settings such as
// search_path).
func (b backend) loadRelease(t *testing.T, db *sql.DB) {
	t.Helper()
	file := filepath.Join("testdata", "release", b.name+".sql")
	dump, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), string(dump)); err != nil {
		t.Fatalf("load %s: %v", file, err)
	}
	_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // discard the connection and its session settings
}

// TestReleaseDatabases opens databases written by the previous release's
// own store (testdata/release) with the single-history store: the bridge
// marks them at the baseline, every record reads back exactly as the old
// store read it, and the store goes on working on them.
func TestReleaseDatabases(t *testing.T) {
	t.Parallel()
	wantJSON, err := os.ReadFile(filepath.Join("testdata", "release", "release.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want releaseRecords
	if err := json.Unmarshal(wantJSON, &want); err != nil {
		t.Fatal(err)
	}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			db, target := b.newDB(t)
			b.loadRelease(t, db)
			s, err := b.open(ctx, target)
			if err != nil {
				t.Fatalf("Open of the release database: %v", err)
			}
			got, err := readRecords(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			gotJSON, _ := json.MarshalIndent(got, "", "  ")
			norm, _ := json.MarshalIndent(&want, "", "  ")
			if string(gotJSON) != string(norm) {
				t.Errorf("records after the bridge differ from the release's:\n got %s\nwant %s", gotJSON, norm)
			}
			for _, sb := range got.Sandboxes {
				if sb.Instance != "inst-1" {
					t.Errorf("sandbox %s: Instance = %q, want inst-1", sb.ID, sb.Instance)
				}
			}
			if got.Sandboxes[0].ContainerID != "c0ffee" {
				t.Errorf("sandbox %s: ContainerID = %q, want c0ffee", got.Sandboxes[0].ID, got.Sandboxes[0].ContainerID)
			}
			var hash [32]byte
			if _, err := hex.Decode(hash[:], []byte(want.KeyHashes[0])); err != nil {
				t.Fatal(err)
			}
			if k, err := s.KeyByHash(ctx, hash); err != nil || k.ID != "key_old" {
				t.Errorf("KeyByHash = %v, %v; want key_old", k, err)
			}

			want := append(legacyVersions(b), embeddedVersions(t)...)
			if vs := schemaVersions(t, db); !slices.Equal(vs, want) {
				t.Errorf("schema_migrations versions = %v, want %v (the old history, the bridged baseline, then the later steps)", vs, want)
			}
			counts, err := s.CountSandboxesByState(ctx)
			if err != nil || !maps.Equal(counts, map[sandbox.State]int{sandbox.StateLeased: 1, sandbox.StateIdle: 1, sandbox.StateDestroyed: 1}) {
				t.Errorf("CountSandboxesByState = %v, %v", counts, err)
			}

			// And it goes on: a claim from the old pool, the one-active-lease
			// index, job updates keeping the mode, an audit record and a
			// network event after the old ones.
			t1 := time.Date(2025, 6, 8, 0, 0, 0, 0, time.UTC)
			l := &sandbox.Lease{ID: "lse_new", Tenant: "beta", State: sandbox.LeaseActive, CreatedAt: t1, RenewedAt: t1, ExpiresAt: t1.Add(time.Hour)}
			if _, sb, err := s.ClaimSandbox(ctx, store.Claim{Lease: l, Profile: "code-python-basic", Runtime: sandbox.RuntimeRunc,
				Instance: "inst-1", Now: t1}); err != nil || sb.ID != "sbx_pool" {
				t.Errorf("ClaimSandbox from the release's pool = %v, %v; want sbx_pool", sb, err)
			}
			if _, _, err := s.ClaimSandbox(ctx, store.Claim{Lease: &sandbox.Lease{ID: "lse_dup", Tenant: "acme",
				State: sandbox.LeaseActive, ExpiresAt: t1.Add(time.Hour)}, SandboxID: "sbx_old", Now: t1}); !errors.Is(err, errdefs.ErrConflict) {
				t.Errorf("second lease of sbx_old: err = %v, want ErrConflict", err)
			}
			if j, err := s.UpdateJob(ctx, "job_old", func(j *sandbox.Job) error {
				j.Mode, j.StderrBytes = sandbox.JobModeSync, 9
				return nil
			}); err != nil || j.Mode != sandbox.JobModeBackground || j.StderrBytes != 9 {
				t.Errorf("UpdateJob = %+v, %v; want mode kept and stderr_bytes 9", j, err)
			}
			if err := s.CreateJob(ctx, &sandbox.Job{ID: "job_new", Tenant: "acme", SandboxID: "sbx_old", State: sandbox.JobPending, CreatedAt: t1}); err != nil {
				t.Error(err)
			}
			r := &tenant.AuditRecord{Time: t1, Actor: "system", Action: "system ttl_expired", Status: 200}
			if err := s.AppendAudit(ctx, r); err != nil || r.Seq <= got.Audit[len(got.Audit)-1].Seq {
				t.Errorf("AppendAudit = seq %d, %v; want after %d", r.Seq, err, got.Audit[len(got.Audit)-1].Seq)
			}
			if err := s.AppendNetworkEvents(ctx, []sandbox.NetworkEvent{{SandboxID: "sbx_old", Time: t1, Proto: "tcp", Decision: "allow"}}); err != nil {
				t.Error(err)
			}
			evs, err := s.ListNetworkEvents(ctx, "sbx_old", got.NetworkEvents[len(got.NetworkEvents)-1].Cursor, 10)
			if err != nil || len(evs) != 1 {
				t.Errorf("events after the release's = %v, %v; want the new one", evs, err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2, err := b.open(ctx, target)
			if err != nil {
				t.Fatalf("reopen: %v", err)
			}
			s2.Close()
			if vs := schemaVersions(t, db); !slices.Equal(vs, want) {
				t.Errorf("schema_migrations versions after reopen = %v, want %v", vs, want)
			}
		})
	}
}
