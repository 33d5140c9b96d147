-- 0013: a sandbox reserved to a service workload of its own (an MCP
-- server that holds operator secrets, as mcp:<instance>): no tenant
-- reaches inside it. Set when the sandbox is made or claimed; '' for
-- every other sandbox.

ALTER TABLE sandboxes ADD COLUMN reserved TEXT NOT NULL DEFAULT '';
