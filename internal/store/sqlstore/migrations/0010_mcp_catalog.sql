-- 0010: the tenants' own MCP catalog entries, each a JSON document the MCP
-- servers package owns, unique by (tenant, name).

CREATE TABLE mcp_catalog (
    tenant     TEXT      NOT NULL,
    name       TEXT      NOT NULL,
    created_at {{.Time}}  NOT NULL,
    doc        {{.JSON}}  NOT NULL,
    PRIMARY KEY (tenant, name)
) {{.TableOptions}};
