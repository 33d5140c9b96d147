-- 0009: skills. A revision is immutable: (tenant, name, revision) with its
-- content digest and a JSON document the skills package owns; the archive
-- of each distinct content is kept once, by digest.

CREATE TABLE skill_archives (
    digest TEXT      NOT NULL PRIMARY KEY,
    size   {{.Int64}} NOT NULL,
    data   {{.Bytes}} NOT NULL
) {{.TableOptions}};

CREATE TABLE skill_revisions (
    tenant     TEXT      NOT NULL,
    name       TEXT      NOT NULL,
    revision   {{.Int64}} NOT NULL,
    digest     TEXT      NOT NULL,
    created_at {{.Time}}  NOT NULL,
    doc        {{.JSON}}  NOT NULL,
    PRIMARY KEY (tenant, name, revision)
) {{.TableOptions}};
