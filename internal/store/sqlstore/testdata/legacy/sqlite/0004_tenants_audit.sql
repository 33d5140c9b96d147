-- 0004: tenants, their API keys (only a SHA-256 of each key is kept) and the
-- append-only audit log. seq is the audit paging cursor: with the single
-- writer of SQLite it grows in commit order.
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
CREATE INDEX api_keys_tenant_created ON api_keys (tenant, created_at);

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
CREATE INDEX audit_time ON audit (time);
CREATE INDEX audit_tenant_seq ON audit (tenant, seq);
CREATE INDEX audit_target_seq ON audit (target, seq);
