// Measures create → first command output through the unmodified
// OpenSandbox SDK: argv[2] iterations of Sandbox.create({image: 'ubuntu'})
// (its two endpoint calls and health check included), commands.run('echo
// hi'), kill (not timed). Prints {total, create, first} in milliseconds as
// JSON (test/bench/e2b_bench_test.go). Environment as for flow.mjs.
import { Sandbox } from '@alibaba-group/opensandbox';

const n = Number(process.argv[2] || 10);
const out = { total: [], create: [], first: [] };
for (let i = 0; i < n; i++) {
  const t0 = performance.now();
  const sbx = await Sandbox.create({ image: 'ubuntu', timeoutSeconds: 120 });
  const t1 = performance.now();
  const r = await sbx.commands.run('echo hi');
  const t2 = performance.now();
  const got = r.logs.stdout.map((m) => m.text).join('\n');
  if (got !== 'hi' || r.exitCode !== 0) throw new Error(`stdout ${JSON.stringify(got)} exit ${r.exitCode}`);
  await sbx.kill();
  await sbx.close();
  out.total.push(t2 - t0);
  out.create.push(t1 - t0);
  out.first.push(t2 - t1);
}
process.stdout.write(JSON.stringify(out) + '\n');
