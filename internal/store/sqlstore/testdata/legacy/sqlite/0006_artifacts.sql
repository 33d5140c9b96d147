-- 0006: job artifacts and the artifact request of each job.
-- Records are JSON documents; the columns serve lookups, tenant isolation
-- and expiry. No foreign keys: artifacts outlive their sandbox and job.
CREATE TABLE artifacts (
    id         TEXT NOT NULL PRIMARY KEY,
    tenant     TEXT NOT NULL,
    job_id     TEXT NOT NULL,
    sha256     TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    doc        TEXT NOT NULL
) STRICT;
CREATE INDEX artifacts_job ON artifacts (job_id);
CREATE INDEX artifacts_sha256 ON artifacts (sha256);
CREATE INDEX artifacts_expires ON artifacts (expires_at);

CREATE TABLE artifact_collections (
    job_id     TEXT NOT NULL PRIMARY KEY,
    tenant     TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    doc        TEXT NOT NULL
) STRICT;
CREATE INDEX artifact_collections_expires ON artifact_collections (expires_at);
