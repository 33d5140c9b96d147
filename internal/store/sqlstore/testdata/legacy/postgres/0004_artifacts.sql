-- 0004: job artifacts and the artifact request of each job (the SQLite
-- schema's version 6). Records are JSON documents; the columns serve
-- lookups, tenant isolation and expiry (Unix nanoseconds). No foreign keys:
-- artifacts outlive their sandbox and job.
CREATE TABLE artifacts (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY,
    id         TEXT   NOT NULL PRIMARY KEY,
    tenant     TEXT   NOT NULL,
    job_id     TEXT   NOT NULL,
    sha256     TEXT   NOT NULL,
    expires_at BIGINT NOT NULL,
    doc        JSONB  NOT NULL
);
CREATE INDEX artifacts_job ON artifacts (job_id, seq);
CREATE INDEX artifacts_sha256 ON artifacts (sha256);
CREATE INDEX artifacts_expires ON artifacts (expires_at);

CREATE TABLE artifact_collections (
    job_id     TEXT   NOT NULL PRIMARY KEY,
    tenant     TEXT   NOT NULL,
    expires_at BIGINT NOT NULL,
    doc        JSONB  NOT NULL
);
CREATE INDEX artifact_collections_expires ON artifact_collections (expires_at);
