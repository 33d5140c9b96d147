-- 0001: sandboxes, jobs and sessions (the SQLite schema at its version 3).
--
-- Times are BIGINT nanoseconds since the Unix epoch (UTC): TIMESTAMPTZ keeps
-- only microseconds and the store contract needs every nanosecond. seq is the
-- insertion order, the tie-breaker of "oldest first" lists. Maps, the
-- resource limits and job commands are JSONB; an empty map or command is NULL.

CREATE TABLE sandboxes (
    seq              BIGINT  GENERATED ALWAYS AS IDENTITY,
    id               TEXT    NOT NULL PRIMARY KEY,
    tenant           TEXT    NOT NULL,
    profile          TEXT    NOT NULL,
    runtime          TEXT    NOT NULL,
    risk_level       TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    image            TEXT    NOT NULL,
    resources        JSONB   NOT NULL,
    env              JSONB,
    metadata         JSONB,
    container_id     TEXT    NOT NULL,
    failure_reason   TEXT    NOT NULL,
    resource_version BIGINT  NOT NULL,
    created_at       BIGINT  NOT NULL,
    updated_at       BIGINT  NOT NULL,
    expires_at       BIGINT
);

CREATE INDEX sandboxes_tenant_created ON sandboxes (tenant, created_at, seq);
CREATE INDEX sandboxes_state_created ON sandboxes (state, created_at, seq);
CREATE INDEX sandboxes_created ON sandboxes (created_at, seq);
CREATE INDEX sandboxes_metadata ON sandboxes USING GIN (metadata jsonb_path_ops);

CREATE TABLE jobs (
    seq              BIGINT  GENERATED ALWAYS AS IDENTITY,
    id               TEXT    NOT NULL PRIMARY KEY,
    tenant           TEXT    NOT NULL,
    sandbox_id       TEXT    NOT NULL REFERENCES sandboxes (id) ON DELETE CASCADE,
    command          JSONB,
    script           TEXT    NOT NULL,
    cwd              TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    exit_code        INTEGER,
    exit_reason      TEXT    NOT NULL,
    signal           TEXT    NOT NULL,
    error            TEXT    NOT NULL,
    stdout_bytes     BIGINT  NOT NULL,
    stderr_bytes     BIGINT  NOT NULL,
    stdout_truncated BOOLEAN NOT NULL,
    stderr_truncated BOOLEAN NOT NULL,
    timeout_ms       BIGINT  NOT NULL,
    created_at       BIGINT  NOT NULL,
    started_at       BIGINT,
    finished_at      BIGINT,
    -- "sync" (the caller waits for the result) or "background".
    mode             TEXT    NOT NULL DEFAULT 'sync'
);

CREATE INDEX jobs_sandbox_created ON jobs (sandbox_id, created_at, seq);
CREATE INDEX jobs_tenant_created ON jobs (tenant, created_at, seq);
CREATE INDEX jobs_state_created ON jobs (state, created_at, seq);
CREATE INDEX jobs_created ON jobs (created_at, seq);

-- Stateful sessions (shell sessions and code-interpreter contexts). The
-- record is a JSON document; id, tenant and sandbox_id are columns for
-- lookups and tenant isolation.
CREATE TABLE sessions (
    id         TEXT  NOT NULL PRIMARY KEY,
    tenant     TEXT  NOT NULL,
    sandbox_id TEXT  NOT NULL REFERENCES sandboxes (id),
    doc        JSONB NOT NULL
);

CREATE INDEX sessions_sandbox ON sessions (sandbox_id);
