-- 0002: tenants, their API keys (only a SHA-256 of each key is kept) and the
-- append-only audit log. Audit inserts take a transaction-scoped advisory
-- lock, so seq (the paging cursor) grows in commit order across every
-- process sharing the database.
CREATE TABLE tenants (
    name             TEXT   NOT NULL PRIMARY KEY,
    doc              JSONB  NOT NULL,
    resource_version BIGINT NOT NULL,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);

CREATE TABLE api_keys (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY,
    id          TEXT   NOT NULL PRIMARY KEY,
    tenant      TEXT   NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,
    hash        BYTEA  NOT NULL UNIQUE,
    prefix      TEXT   NOT NULL,
    description TEXT   NOT NULL,
    created_at  BIGINT NOT NULL,
    revoked_at  BIGINT
);
CREATE INDEX api_keys_tenant_created ON api_keys (tenant, created_at, seq);

CREATE TABLE audit (
    seq        BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    time       BIGINT  NOT NULL,
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
