-- 0007: leases, and the service instance that made each sandbox.
--
-- A sandbox's instance is the service that alone can reach its agent; pool
-- members are sandboxes of tenant '' in state idle. A lease record is a
-- JSON document; the columns are what lookups, the expiry reaper and the
-- one-active-lease-per-sandbox guarantee need.
ALTER TABLE sandboxes ADD COLUMN instance TEXT NOT NULL DEFAULT '';
CREATE INDEX sandboxes_pool ON sandboxes (state, tenant, profile, runtime, instance, created_at);

CREATE TABLE leases (
    id         TEXT NOT NULL PRIMARY KEY,
    tenant     TEXT NOT NULL,
    sandbox_id TEXT NOT NULL REFERENCES sandboxes (id),
    state      TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    created_at TEXT NOT NULL,
    doc        TEXT NOT NULL
) STRICT;
CREATE UNIQUE INDEX leases_one_active ON leases (sandbox_id) WHERE state = 'active';
CREATE INDEX leases_tenant_created ON leases (tenant, created_at);
CREATE INDEX leases_state_expires ON leases (state, expires_at);
