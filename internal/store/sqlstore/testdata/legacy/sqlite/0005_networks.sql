-- 0005: network policy of networked sandboxes (a JSON document) and their
-- egress audit events. An event's id is its cursor.
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

CREATE INDEX network_events_sandbox ON network_events (sandbox_id, id);
