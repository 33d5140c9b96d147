-- 0001: sandboxes and jobs.
--
-- Times are UTC text in the fixed-width layout 2006-01-02T15:04:05.000000000Z,
-- so they sort lexicographically and round-trip to the nanosecond. Maps, the
-- resource limits and job commands are JSON text; an empty map or command is
-- NULL.

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
) STRICT;

CREATE INDEX sandboxes_tenant_created ON sandboxes (tenant, created_at);
CREATE INDEX sandboxes_state_created ON sandboxes (state, created_at);
CREATE INDEX sandboxes_created ON sandboxes (created_at);

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
) STRICT;

CREATE INDEX jobs_sandbox_created ON jobs (sandbox_id, created_at);
CREATE INDEX jobs_tenant_created ON jobs (tenant, created_at);
CREATE INDEX jobs_state_created ON jobs (state, created_at);
