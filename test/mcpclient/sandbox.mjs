// Connects the official TypeScript MCP SDK client, unmodified, to the
// service's own MCP server (/v1/mcp/sandbox) with the tenant's API key,
// lists the tools, creates a sandbox under RUNTIME, runs code twice in one
// context, writes and reads a file, destroys the sandbox, ends the session,
// tries a wrong key, and prints what it saw as JSON.
//
//   node sandbox.mjs URL API_KEY RUNTIME
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, key, runtime] = process.argv.slice(2);

async function connect(token) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: "ts-sandbox", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
}

const { client, transport } = await connect(key);
const call = async (name, args) => {
  const res = await client.callTool({ name, arguments: args });
  if (res.isError) throw new Error(`${name}: ${res.content?.[0]?.text}`);
  return res.structuredContent;
};
const tools = await client.listTools();
const sb = await call("create_sandbox", { profile: "code-python-data", runtime, risk_level: "low" });
const first = await call("run_code", { sandbox_id: sb.sandbox_id, code: "x = 41" });
const second = await call("run_code", { sandbox_id: sb.sandbox_id, code: "x + 1" });
await call("write_file", { sandbox_id: sb.sandbox_id, path: "ts.txt", content: "from typescript" });
const read = await call("read_file", { sandbox_id: sb.sandbox_id, path: "ts.txt" });
const destroyed = await call("destroy_sandbox", { sandbox_id: sb.sandbox_id });
await transport.terminateSession();
await client.close();

let wrongKey = "connected";
try {
  const w = await connect("wrong-key-0123456789");
  await w.client.close();
} catch (err) {
  wrongKey = String(err?.code ?? err?.message ?? err);
}

console.log(JSON.stringify({
  tools: tools.tools.map((t) => t.name),
  annotations: Object.fromEntries(tools.tools.map((t) => [t.name, t.annotations])),
  sandbox: sb,
  contexts: [first.context_id, second.context_id],
  value: second.value,
  read: read.content,
  destroyed: destroyed.destroyed,
  wrongKey,
}));
