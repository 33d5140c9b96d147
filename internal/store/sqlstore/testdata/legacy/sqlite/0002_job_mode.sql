-- 0002: how a job runs: "sync" (the caller waits for the result) or
-- "background" (detached from the request; output kept in the job log).
ALTER TABLE jobs ADD COLUMN mode TEXT NOT NULL DEFAULT 'sync';
