-- 0014: snapshots of sandboxes: their files and, under runsc, processes and
-- memory, kept on disk under the data dir; the record says what a new
-- sandbox from one gets and whether it is complete. A sandbox that is
-- paused or hibernated (or on its way) says so in its suspension: the state
-- it returns to, the operation under way and the hibernation's snapshot.

ALTER TABLE sandboxes ADD COLUMN suspension {{.JSON}};

CREATE TABLE snapshots (
    id         TEXT    NOT NULL PRIMARY KEY,
    tenant     TEXT    NOT NULL,
    sandbox_id TEXT    NOT NULL,
    state      TEXT    NOT NULL,
    internal   {{.Bool}} NOT NULL,
    size_bytes {{.Int64}} NOT NULL,
    created_at {{.Time}} NOT NULL,
    expires_at {{.Time}},
    doc        TEXT    NOT NULL
) {{.TableOptions}};

CREATE INDEX snapshots_tenant ON snapshots (tenant, created_at);
CREATE INDEX snapshots_sandbox ON snapshots (sandbox_id);
CREATE INDEX snapshots_expires ON snapshots (expires_at);
