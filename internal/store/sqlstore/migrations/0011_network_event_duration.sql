-- 0011: how long an allowed connection was open. An event's time is when
-- the sandbox made the attempt; a connection is recorded when it ends.

ALTER TABLE network_events ADD COLUMN duration_ms {{.Int64}} NOT NULL DEFAULT 0;
