-- 0014: the scopes of an API key, space-separated: rights it holds beyond
-- the API every key of its tenant may use ("approve": decide MCP call
-- approvals and approve changed tool definitions). Keys made before have
-- none.

ALTER TABLE api_keys ADD COLUMN scopes TEXT NOT NULL DEFAULT '';
