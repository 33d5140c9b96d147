-- 0003: network policy of networked sandboxes (a JSON document) and their
-- egress audit events (SQLite 0005). An event's id is its cursor; times are
-- Unix nanoseconds.
CREATE TABLE sandbox_networks (
    sandbox_id       TEXT   NOT NULL PRIMARY KEY REFERENCES sandboxes (id),
    tenant           TEXT   NOT NULL,
    status           TEXT   NOT NULL,
    resource_version BIGINT NOT NULL,
    doc              JSONB  NOT NULL
);

CREATE TABLE network_events (
    id         BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sandbox_id TEXT    NOT NULL REFERENCES sandboxes (id),
    time       BIGINT  NOT NULL,
    name       TEXT    NOT NULL,
    address    TEXT    NOT NULL,
    port       INTEGER NOT NULL,
    proto      TEXT    NOT NULL,
    decision   TEXT    NOT NULL,
    reason     TEXT    NOT NULL,
    bytes_up   BIGINT  NOT NULL,
    bytes_down BIGINT  NOT NULL
);

CREATE INDEX network_events_sandbox ON network_events (sandbox_id, id);
