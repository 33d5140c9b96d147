-- 0008: the baseline of the single schema history: sandboxes, jobs,
-- sessions, tenants and API keys, the audit log, sandbox networks, artifacts
-- and leases, exactly as the per-backend histories of earlier releases left
-- them (SQLite 0001–0007, PostgreSQL 0001–0005), which are bridged to this
-- version without running it.
--
-- Times are {{.Time}}: on SQLite UTC text in the fixed-width layout
-- 2006-01-02T15:04:05.000000000Z (it sorts as text), elsewhere nanoseconds
-- since the Unix epoch (TIMESTAMPTZ keeps only microseconds); both keep
-- every nanosecond. Maps, the resource limits, job commands and the records
-- kept as documents are JSON; an empty map or command is NULL. Lists are
-- ordered by created_at, then by insertion order (SQLite's rowid, else seq).

CREATE TABLE sandboxes (
    {{.Seq}}
    id               TEXT    NOT NULL PRIMARY KEY,
    tenant           TEXT    NOT NULL,
    profile          TEXT    NOT NULL,
    runtime          TEXT    NOT NULL,
    risk_level       TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    image            TEXT    NOT NULL,
    resources        {{.JSON}} NOT NULL,
    env              {{.JSON}},
    metadata         {{.JSON}},
    container_id     TEXT    NOT NULL,
    failure_reason   TEXT    NOT NULL,
    resource_version {{.Int64}} NOT NULL,
    created_at       {{.Time}} NOT NULL,
    updated_at       {{.Time}} NOT NULL,
    expires_at       {{.Time}},
    -- The service instance that made the sandbox: it alone can reach its
    -- agent. Pool members are sandboxes of tenant '' in state idle.
    instance         TEXT    NOT NULL DEFAULT ''
) {{.TableOptions}};

CREATE INDEX sandboxes_tenant_created ON sandboxes (tenant, created_at{{.SeqKey}});
CREATE INDEX sandboxes_state_created ON sandboxes (state, created_at{{.SeqKey}});
CREATE INDEX sandboxes_created ON sandboxes (created_at{{.SeqKey}});
CREATE INDEX sandboxes_pool ON sandboxes (state, tenant, profile, runtime, instance, created_at{{.SeqKey}});
{{- if .Postgres}}
CREATE INDEX sandboxes_metadata ON sandboxes USING GIN (metadata jsonb_path_ops);
{{- end}}

CREATE TABLE jobs (
    {{.Seq}}
    id               TEXT    NOT NULL PRIMARY KEY,
    tenant           TEXT    NOT NULL,
    sandbox_id       TEXT    NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    command          {{.JSON}},
    script           TEXT    NOT NULL,
    cwd              TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    exit_code        INTEGER,
    exit_reason      TEXT    NOT NULL,
    signal           TEXT    NOT NULL,
    error            TEXT    NOT NULL,
    stdout_bytes     {{.Int64}} NOT NULL,
    stderr_bytes     {{.Int64}} NOT NULL,
    stdout_truncated {{.Bool}} NOT NULL,
    stderr_truncated {{.Bool}} NOT NULL,
    timeout_ms       {{.Int64}} NOT NULL,
    created_at       {{.Time}} NOT NULL,
    started_at       {{.Time}},
    finished_at      {{.Time}},
    -- "sync" (the caller waits for the result) or "background".
    mode             TEXT    NOT NULL DEFAULT 'sync'
) {{.TableOptions}};

CREATE INDEX jobs_sandbox_created ON jobs (sandbox_id, created_at{{.SeqKey}});
CREATE INDEX jobs_tenant_created ON jobs (tenant, created_at{{.SeqKey}});
CREATE INDEX jobs_state_created ON jobs (state, created_at{{.SeqKey}});
{{- if .Postgres}}
CREATE INDEX jobs_created ON jobs (created_at, seq);
{{- end}}

-- Stateful sessions (shell sessions and code-interpreter contexts). The
-- record is a JSON document; id, tenant and sandbox_id are columns for
-- lookups and tenant isolation.
CREATE TABLE sessions (
    id         TEXT NOT NULL PRIMARY KEY,
    tenant     TEXT NOT NULL,
    sandbox_id TEXT NOT NULL REFERENCES sandboxes (id),
    doc        {{.JSON}} NOT NULL
) {{.TableOptions}};
CREATE INDEX sessions_sandbox ON sessions (sandbox_id);

-- Tenants, their API keys (only a SHA-256 of each key is kept) and the
-- append-only audit log. seq is the audit paging cursor: it grows in commit
-- order (SQLite's single writer; elsewhere inserts hold an advisory lock).
CREATE TABLE tenants (
    name             TEXT    NOT NULL PRIMARY KEY,
    doc              {{.JSON}} NOT NULL,
    resource_version {{.Int64}} NOT NULL,
    created_at       {{.Time}} NOT NULL,
    updated_at       {{.Time}} NOT NULL
) {{.TableOptions}};

CREATE TABLE api_keys (
    {{.Seq}}
    id          TEXT NOT NULL PRIMARY KEY,
    tenant      TEXT NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,
    hash        {{.Bytes}} NOT NULL UNIQUE,
    prefix      TEXT NOT NULL,
    description TEXT NOT NULL,
    created_at  {{.Time}} NOT NULL,
    revoked_at  {{.Time}}
) {{.TableOptions}};
CREATE INDEX api_keys_tenant_created ON api_keys (tenant, created_at{{.SeqKey}});

CREATE TABLE audit (
    seq        {{.Serial}},
    time       {{.Time}} NOT NULL,
    actor      TEXT    NOT NULL,
    tenant     TEXT    NOT NULL,
    action     TEXT    NOT NULL,
    target     TEXT    NOT NULL,
    status     INTEGER NOT NULL,
    code       TEXT    NOT NULL,
    request_id TEXT    NOT NULL,
    remote     TEXT    NOT NULL
);
CREATE INDEX audit_time ON audit (time);
CREATE INDEX audit_tenant_seq ON audit (tenant, seq);
CREATE INDEX audit_target_seq ON audit (target, seq);

-- Network policy of networked sandboxes (a JSON document) and their egress
-- audit events. An event's id is its cursor.
CREATE TABLE sandbox_networks (
    sandbox_id       TEXT    NOT NULL PRIMARY KEY REFERENCES sandboxes (id),
    tenant           TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    resource_version {{.Int64}} NOT NULL,
    doc              {{.JSON}} NOT NULL
) {{.TableOptions}};

CREATE TABLE network_events (
    id         {{.Serial}},
    sandbox_id TEXT    NOT NULL REFERENCES sandboxes (id),
    time       {{.Time}} NOT NULL,
    name       TEXT    NOT NULL,
    address    TEXT    NOT NULL,
    port       INTEGER NOT NULL,
    proto      TEXT    NOT NULL,
    decision   TEXT    NOT NULL,
    reason     TEXT    NOT NULL,
    bytes_up   {{.Int64}} NOT NULL,
    bytes_down {{.Int64}} NOT NULL
) {{.TableOptions}};
CREATE INDEX network_events_sandbox ON network_events (sandbox_id, id);

-- Job artifacts and the artifact request of each job. Records are JSON
-- documents; the columns serve lookups, tenant isolation and expiry. No
-- foreign keys: artifacts outlive their sandbox and job.
CREATE TABLE artifacts (
    {{.Seq}}
    id         TEXT NOT NULL PRIMARY KEY,
    tenant     TEXT NOT NULL,
    job_id     TEXT NOT NULL,
    sha256     TEXT NOT NULL,
    expires_at {{.Time}} NOT NULL,
    doc        {{.JSON}} NOT NULL
) {{.TableOptions}};
CREATE INDEX artifacts_job ON artifacts (job_id{{.SeqKey}});
CREATE INDEX artifacts_sha256 ON artifacts (sha256);
CREATE INDEX artifacts_expires ON artifacts (expires_at);

CREATE TABLE artifact_collections (
    job_id     TEXT NOT NULL PRIMARY KEY,
    tenant     TEXT NOT NULL,
    expires_at {{.Time}} NOT NULL,
    doc        {{.JSON}} NOT NULL
) {{.TableOptions}};
CREATE INDEX artifact_collections_expires ON artifact_collections (expires_at);

-- Leases. A lease record is a JSON document; the columns are what lookups,
-- the expiry reaper and the one-active-lease-per-sandbox guarantee need.
CREATE TABLE leases (
    {{.Seq}}
    id         TEXT NOT NULL PRIMARY KEY,
    tenant     TEXT NOT NULL,
    sandbox_id TEXT NOT NULL REFERENCES sandboxes (id),
    state      TEXT NOT NULL,
    expires_at {{.Time}} NOT NULL,
    created_at {{.Time}} NOT NULL,
    doc        {{.JSON}} NOT NULL
) {{.TableOptions}};
CREATE UNIQUE INDEX leases_one_active ON leases (sandbox_id) WHERE state = 'active';
CREATE INDEX leases_tenant_created ON leases (tenant, created_at{{.SeqKey}});
CREATE INDEX leases_state_expires ON leases (state, expires_at);
