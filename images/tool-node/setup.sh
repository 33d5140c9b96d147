# MCP servers from npm, installed at build time from the lockfile (exact
# versions and integrity hashes): nothing is fetched when a sandbox runs.
# The builder lets setup scripts resolve names (and empties resolv.conf after).
cd /opt/genesis/mcp
npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=warn
rm -rf /root/.npm /root/.cache
chmod -R a+rX /opt/genesis/mcp
