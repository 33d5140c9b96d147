-- A database written by the release before the single schema history
-- (SQLite schema version 7): its schema and the records of release.json
-- as INSERT statements.
CREATE TABLE schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		applied_at TEXT    NOT NULL
	) STRICT;
CREATE TABLE sandboxes (
    id               TEXT    NOT NULL PRIMARY KEY,
    tenant           TEXT    NOT NULL,
    profile          TEXT    NOT NULL,
    runtime          TEXT    NOT NULL,
    risk_level       TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    image            TEXT    NOT NULL,
    resources        TEXT    NOT NULL,
    env              TEXT,
    metadata         TEXT,
    container_id     TEXT    NOT NULL,
    failure_reason   TEXT    NOT NULL,
    resource_version INTEGER NOT NULL,
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL,
    expires_at       TEXT
, instance TEXT NOT NULL DEFAULT '') STRICT;
CREATE TABLE jobs (
    id               TEXT    NOT NULL PRIMARY KEY,
    tenant           TEXT    NOT NULL,
    sandbox_id       TEXT    NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    command          TEXT,
    script           TEXT    NOT NULL,
    cwd              TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    exit_code        INTEGER,
    exit_reason      TEXT    NOT NULL,
    signal           TEXT    NOT NULL,
    error            TEXT    NOT NULL,
    stdout_bytes     INTEGER NOT NULL,
    stderr_bytes     INTEGER NOT NULL,
    stdout_truncated INTEGER NOT NULL,
    stderr_truncated INTEGER NOT NULL,
    timeout_ms       INTEGER NOT NULL,
    created_at       TEXT    NOT NULL,
    started_at       TEXT,
    finished_at      TEXT
, mode TEXT NOT NULL DEFAULT 'sync') STRICT;
CREATE TABLE sessions (
    id         TEXT NOT NULL PRIMARY KEY,
    tenant     TEXT NOT NULL,
    sandbox_id TEXT NOT NULL REFERENCES sandboxes (id),
    doc        TEXT NOT NULL
) STRICT;
CREATE TABLE tenants (
    name             TEXT    NOT NULL PRIMARY KEY,
    doc              TEXT    NOT NULL,
    resource_version INTEGER NOT NULL,
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL
) STRICT;
CREATE TABLE api_keys (
    id          TEXT NOT NULL PRIMARY KEY,
    tenant      TEXT NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,
    hash        BLOB NOT NULL UNIQUE,
    prefix      TEXT NOT NULL,
    description TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    revoked_at  TEXT
) STRICT;
CREATE TABLE audit (
    seq        INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    time       TEXT    NOT NULL,
    actor      TEXT    NOT NULL,
    tenant     TEXT    NOT NULL,
    action     TEXT    NOT NULL,
    target     TEXT    NOT NULL,
    status     INTEGER NOT NULL,
    code       TEXT    NOT NULL,
    request_id TEXT    NOT NULL,
    remote     TEXT    NOT NULL
);
CREATE TABLE sandbox_networks (
    sandbox_id       TEXT    NOT NULL PRIMARY KEY REFERENCES sandboxes (id),
    tenant           TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    resource_version INTEGER NOT NULL,
    doc              TEXT    NOT NULL
) STRICT;
CREATE TABLE network_events (
    id         INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    sandbox_id TEXT    NOT NULL REFERENCES sandboxes (id),
    time       TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    address    TEXT    NOT NULL,
    port       INTEGER NOT NULL,
    proto      TEXT    NOT NULL,
    decision   TEXT    NOT NULL,
    reason     TEXT    NOT NULL,
    bytes_up   INTEGER NOT NULL,
    bytes_down INTEGER NOT NULL
) STRICT;
CREATE TABLE artifacts (
    id         TEXT NOT NULL PRIMARY KEY,
    tenant     TEXT NOT NULL,
    job_id     TEXT NOT NULL,
    sha256     TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    doc        TEXT NOT NULL
) STRICT;
CREATE TABLE artifact_collections (
    job_id     TEXT NOT NULL PRIMARY KEY,
    tenant     TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    doc        TEXT NOT NULL
) STRICT;
CREATE TABLE leases (
    id         TEXT NOT NULL PRIMARY KEY,
    tenant     TEXT NOT NULL,
    sandbox_id TEXT NOT NULL REFERENCES sandboxes (id),
    state      TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    created_at TEXT NOT NULL,
    doc        TEXT NOT NULL
) STRICT;
CREATE INDEX sandboxes_tenant_created ON sandboxes (tenant, created_at);
CREATE INDEX sandboxes_state_created ON sandboxes (state, created_at);
CREATE INDEX sandboxes_created ON sandboxes (created_at);
CREATE INDEX jobs_sandbox_created ON jobs (sandbox_id, created_at);
CREATE INDEX jobs_tenant_created ON jobs (tenant, created_at);
CREATE INDEX jobs_state_created ON jobs (state, created_at);
CREATE INDEX sessions_sandbox ON sessions (sandbox_id);
CREATE INDEX api_keys_tenant_created ON api_keys (tenant, created_at);
CREATE INDEX audit_time ON audit (time);
CREATE INDEX audit_tenant_seq ON audit (tenant, seq);
CREATE INDEX audit_target_seq ON audit (target, seq);
CREATE INDEX network_events_sandbox ON network_events (sandbox_id, id);
CREATE INDEX artifacts_job ON artifacts (job_id);
CREATE INDEX artifacts_sha256 ON artifacts (sha256);
CREATE INDEX artifacts_expires ON artifacts (expires_at);
CREATE INDEX artifact_collections_expires ON artifact_collections (expires_at);
CREATE INDEX sandboxes_pool ON sandboxes (state, tenant, profile, runtime, instance, created_at);
CREATE UNIQUE INDEX leases_one_active ON leases (sandbox_id) WHERE state = 'active';
CREATE INDEX leases_tenant_created ON leases (tenant, created_at);
CREATE INDEX leases_state_expires ON leases (state, expires_at);
INSERT INTO schema_migrations (version, applied_at) VALUES (1, '2026-12-01T21:15:14.256Z');
INSERT INTO schema_migrations (version, applied_at) VALUES (2, '2026-12-01T21:15:14.256Z');
INSERT INTO schema_migrations (version, applied_at) VALUES (3, '2026-12-01T21:15:14.257Z');
INSERT INTO schema_migrations (version, applied_at) VALUES (4, '2026-12-01T21:15:14.257Z');
INSERT INTO schema_migrations (version, applied_at) VALUES (5, '2026-12-01T21:15:14.258Z');
INSERT INTO schema_migrations (version, applied_at) VALUES (6, '2026-12-01T21:15:14.259Z');
INSERT INTO schema_migrations (version, applied_at) VALUES (7, '2026-12-01T21:15:14.259Z');
INSERT INTO sandboxes (id, tenant, profile, runtime, risk_level, state, image, resources, env, metadata, container_id, failure_reason, resource_version, created_at, updated_at, expires_at, instance) VALUES ('sbx_old', 'acme', 'code-python-basic', 'runc', 'low', 'leased', 'genesis/code-python-basic:1', '{"cpu":1,"memory_mb":256,"pids":64}', '{"A":"1","B":"2"}', '{"k":"v"}', 'c0ffee', 'none yet', 3, '2025-06-07T08:09:10.123456789Z', '2025-06-07T08:09:12.123456789Z', '2025-06-07T09:09:10.123456789Z', 'inst-1');
INSERT INTO sandboxes (id, tenant, profile, runtime, risk_level, state, image, resources, env, metadata, container_id, failure_reason, resource_version, created_at, updated_at, expires_at, instance) VALUES ('sbx_pool', '', 'code-python-basic', 'runc', 'low', 'idle', 'genesis/code-python-basic:1', '{"cpu":1,"memory_mb":256,"pids":64}', NULL, NULL, '', '', 1, '2025-06-07T08:09:10.123456789Z', '2025-06-07T08:09:10.123456789Z', NULL, 'inst-1');
INSERT INTO sandboxes (id, tenant, profile, runtime, risk_level, state, image, resources, env, metadata, container_id, failure_reason, resource_version, created_at, updated_at, expires_at, instance) VALUES ('sbx_gone', 'acme', 'code-python-basic', 'runc', 'low', 'destroyed', 'genesis/code-python-basic:1', '{"cpu":1,"memory_mb":256,"pids":64}', NULL, NULL, '', '', 1, '2025-06-07T08:09:10.123456789Z', '2025-06-07T08:09:10.123456789Z', NULL, 'inst-1');
INSERT INTO jobs (id, tenant, sandbox_id, command, script, cwd, state, exit_code, exit_reason, signal, error, stdout_bytes, stderr_bytes, stdout_truncated, stderr_truncated, timeout_ms, created_at, started_at, finished_at, mode) VALUES ('job_old', 'acme', 'sbx_old', '["echo","hi"]', '', '/workspace', 'succeeded', 0, 'exited', '', '', 3, 0, 1, 0, 30000, '2025-06-07T08:09:10.123456789Z', '2025-06-07T08:09:12.123456789Z', '2025-06-07T08:09:13.123456789Z', 'background');
INSERT INTO jobs (id, tenant, sandbox_id, command, script, cwd, state, exit_code, exit_reason, signal, error, stdout_bytes, stderr_bytes, stdout_truncated, stderr_truncated, timeout_ms, created_at, started_at, finished_at, mode) VALUES ('job_script', 'acme', 'sbx_old', NULL, 'ls
', '', 'pending', NULL, '', '', '', 0, 0, 0, 0, 0, '2025-06-07T08:09:11.123456789Z', NULL, NULL, 'sync');
INSERT INTO sessions (id, tenant, sandbox_id, doc) VALUES ('ses_old', 'acme', 'sbx_old', '{"id":"ses_old","tenant":"acme","sandbox_id":"sbx_old","kind":"shell","state":"active","cwd":"/workspace","runs":2,"created_at":"2025-06-07T08:09:10.123456789Z","updated_at":"2025-06-07T08:09:10.123456789Z"}');
INSERT INTO tenants (name, doc, resource_version, created_at, updated_at) VALUES ('acme', '{"name":"acme","weight":3,"admin":true,"quotas":{"max_sandboxes":0,"max_cpu":0,"max_memory_mb":0,"max_leases":0},"source":"config","resource_version":2,"created_at":"2025-06-07T08:09:10.123456789Z","updated_at":"2025-06-07T08:10:10.123456789Z"}', 2, '2025-06-07T08:09:10.123456789Z', '2025-06-07T08:10:10.123456789Z');
INSERT INTO api_keys (id, tenant, hash, prefix, description, created_at, revoked_at) VALUES ('key_old', 'acme', X'0102030000000000000000000000000000000000000000000000000000000009', 'gsk_abcd', 'ci', '2025-06-07T08:09:10.123456789Z', '2025-06-07T09:09:10.123456789Z');
INSERT INTO audit (seq, time, actor, tenant, action, target, status, code, request_id, remote) VALUES (1, '2025-06-07T08:09:10.123456789Z', 'key_old', 'acme', 'POST /v1/sandboxes', 'sbx_old', 201, '', 'r1', '127.0.0.1');
INSERT INTO audit (seq, time, actor, tenant, action, target, status, code, request_id, remote) VALUES (2, '2025-06-07T08:09:11.123456789Z', 'anonymous', '', 'GET /v1/sandboxes', '', 401, 'unauthenticated', 'r2', '');
INSERT INTO sandbox_networks (sandbox_id, tenant, status, resource_version, doc) VALUES ('sbx_old', 'acme', 'active', 1, '{"sandbox_id":"sbx_old","tenant":"acme","policy":{"mode":""},"status":"active","gateway_ip":"10.0.0.1","resourceVersion":1,"updated_at":"2025-06-07T08:09:10.123456789Z"}');
INSERT INTO network_events (id, sandbox_id, time, name, address, port, proto, decision, reason, bytes_up, bytes_down) VALUES (1, 'sbx_old', '2025-06-07T08:09:10.123456789Z', 'pypi.org', '', 443, 'tcp', 'allow', '', 10, 20);
INSERT INTO network_events (id, sandbox_id, time, name, address, port, proto, decision, reason, bytes_up, bytes_down) VALUES (2, 'sbx_old', '2025-06-07T08:09:11.123456789Z', '', '203.0.113.9', 80, 'tcp', 'deny', 'not allowed', 0, 0);
INSERT INTO artifacts (id, tenant, job_id, sha256, expires_at, doc) VALUES ('art_old', 'acme', 'job_old', 'abababababababababababababababababababababababababababababababab', '2025-06-08T08:09:10.123456789Z', '{"id":"art_old","tenant":"acme","job_id":"job_old","sandbox_id":"sbx_old","path":"out/a.txt","name":"a.txt","size":5,"sha256":"abababababababababababababababababababababababababababababababab","mime":"text/plain","created_at":"2025-06-07T08:09:10.123456789Z","expires_at":"2025-06-08T08:09:10.123456789Z"}');
INSERT INTO artifact_collections (job_id, tenant, expires_at, doc) VALUES ('job_old', 'acme', '2025-06-08T08:09:10.123456789Z', '{"job_id":"job_old","tenant":"acme","sandbox_id":"sbx_old","spec":{"paths":["out/*"]},"state":"done","collected":1,"collected_bytes":5,"created_at":"2025-06-07T08:09:10.123456789Z","finished_at":"2025-06-07T08:09:13.123456789Z","expires_at":"2025-06-08T08:09:10.123456789Z"}');
INSERT INTO leases (id, tenant, sandbox_id, state, expires_at, created_at, doc) VALUES ('lse_old', 'acme', 'sbx_old', 'active', '2025-06-07T09:09:10.123456789Z', '2025-06-07T08:09:10.123456789Z', '{"id":"lse_old","tenant":"acme","sandbox_id":"sbx_old","profile":"","runtime":"","state":"active","warm":false,"metadata":{"lk":"lv"},"ttl_seconds":3600,"resourceVersion":1,"created_at":"2025-06-07T08:09:10.123456789Z","renewed_at":"2025-06-07T08:09:10.123456789Z","expires_at":"2025-06-07T09:09:10.123456789Z"}');
INSERT INTO sqlite_sequence (name, seq) VALUES ('audit', 2);
INSERT INTO sqlite_sequence (name, seq) VALUES ('network_events', 2);
