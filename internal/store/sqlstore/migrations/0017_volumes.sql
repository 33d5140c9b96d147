-- 0017: named volumes: a tenant's directories with a hard size limit that
-- outlive sandboxes. The document holds the record, the sandboxes that
-- mount the volume among it; mounted says whether any does (the reconciler
-- looks only at those). A name is unique within its tenant.

CREATE TABLE volumes (
    id         TEXT     NOT NULL PRIMARY KEY,
    tenant     TEXT     NOT NULL,
    name       TEXT     NOT NULL,
    state      TEXT     NOT NULL,
    size_mb    {{.Int64}} NOT NULL,
    mounted    {{.Bool}} NOT NULL,
    created_at {{.Time}} NOT NULL,
    doc        TEXT     NOT NULL
) {{.TableOptions}};

CREATE UNIQUE INDEX volumes_tenant_name ON volumes (tenant, name);
CREATE INDEX volumes_mounted ON volumes (mounted);
