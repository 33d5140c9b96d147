// Measures create → first command output through the unmodified E2B SDK:
// argv[2] iterations of Sandbox.create('base'), commands.run('echo hi'),
// kill (not timed). Prints {total, create, first} in milliseconds as JSON
// (test/bench/e2b_bench_test.go). Environment as for flow.mjs.
import { Sandbox } from 'e2b';

const n = Number(process.argv[2] || 10);
const out = { total: [], create: [], first: [] };
for (let i = 0; i < n; i++) {
  const t0 = performance.now();
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000 });
  const t1 = performance.now();
  const r = await sbx.commands.run('echo hi');
  const t2 = performance.now();
  if (r.stdout !== 'hi\n') throw new Error(`stdout ${JSON.stringify(r.stdout)}`);
  await sbx.kill();
  out.total.push(t2 - t0);
  out.create.push(t1 - t0);
  out.first.push(t2 - t1);
}
process.stdout.write(JSON.stringify(out) + '\n');
