// Connects the official TypeScript MCP SDK client, unmodified, to an MCP
// endpoint of the service with the instance's bearer token, lists the
// tools and calls `echo` from two clients at once (each numbers its
// JSON-RPC ids from 0, so the ids collide), and prints what it saw as JSON.
//
//   node client.mjs URL TOKEN
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token] = process.argv.slice(2);

async function connect(name) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name, version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
}

const a = await connect("ts-a");
const b = await connect("ts-b");
const tools = await a.client.listTools();
const calls = [];
for (const [who, c] of [["a", a.client], ["b", b.client]]) {
  for (let i = 0; i < 10; i++) {
    const want = `${who}-${i}`;
    calls.push(
      c.callTool({ name: "echo", arguments: { message: want } }).then((res) => ({ want, got: res.content?.[0]?.text })),
    );
  }
}
const answers = await Promise.all(calls);
console.log(JSON.stringify({
  protocol: a.transport.protocolVersion,
  server: a.client.getServerVersion(),
  tools: tools.tools.map((t) => t.name),
  answers,
}));
await a.client.close();
await b.client.close();
