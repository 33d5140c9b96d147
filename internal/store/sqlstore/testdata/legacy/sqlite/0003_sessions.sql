-- 0003: stateful sessions (shell sessions and code-interpreter contexts).
-- The record is a JSON document; id, tenant and sandbox_id are columns for
-- lookups and tenant isolation.
CREATE TABLE sessions (
    id         TEXT NOT NULL PRIMARY KEY,
    tenant     TEXT NOT NULL,
    sandbox_id TEXT NOT NULL REFERENCES sandboxes (id),
    doc        TEXT NOT NULL
) STRICT;
CREATE INDEX sessions_sandbox ON sessions (sandbox_id);
