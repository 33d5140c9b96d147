-- 0005: leases, and the service instance that made each sandbox (SQLite 0007).
--
-- A sandbox's instance is the service that alone can reach its agent; pool
-- members are sandboxes of tenant '' in state idle. A lease record is a
-- JSONB document; the columns are what lookups, the expiry reaper and the
-- one-active-lease-per-sandbox guarantee need.
ALTER TABLE sandboxes ADD COLUMN instance TEXT NOT NULL DEFAULT '';
CREATE INDEX sandboxes_pool ON sandboxes (state, tenant, profile, runtime, instance, created_at, seq);

CREATE TABLE leases (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY,
    id         TEXT   NOT NULL PRIMARY KEY,
    tenant     TEXT   NOT NULL,
    sandbox_id TEXT   NOT NULL REFERENCES sandboxes (id),
    state      TEXT   NOT NULL,
    expires_at BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    doc        JSONB  NOT NULL
);
CREATE UNIQUE INDEX leases_one_active ON leases (sandbox_id) WHERE state = 'active';
CREATE INDEX leases_tenant_created ON leases (tenant, created_at, seq);
CREATE INDEX leases_state_expires ON leases (state, expires_at);
