// Drives the unmodified E2B SDKs through their core flows against the
// service's /e2b adapter and prints what each step saw as one JSON object
// (test/e2e/e2b_test.go asserts on it). Environment: E2B_API_URL,
// E2B_SANDBOX_URL, E2B_API_KEY as a user of the SDK sets them; argv[2] is
// the flow: "core" (e2b) or "interpreter" (@e2b/code-interpreter).
import { Sandbox, CommandExitError, SandboxNotFoundError } from 'e2b';
import { Sandbox as CodeInterpreter } from '@e2b/code-interpreter';

const out = {};
const errInfo = (e) => ({ name: e?.constructor?.name, message: String(e?.message ?? e) });

async function core() {
  const t0 = performance.now();
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000, metadata: { suite: 'e2b-flow' } });
  out.createMs = performance.now() - t0;
  out.id = sbx.sandboxId;
  out.host8000 = sbx.getHost(8000);
  const first = await sbx.commands.run('echo first');
  out.firstOutputMs = performance.now() - t0;
  out.first = first.stdout;
  const r = await sbx.commands.run('echo hello; echo oops >&2; pwd');
  out.run = { stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode };
  try {
    await sbx.commands.run('echo bad >&2; exit 3');
    out.fail = { thrown: false };
  } catch (e) {
    out.fail = { thrown: true, commandExitError: e instanceof CommandExitError, exitCode: e.exitCode, stderr: e.stderr };
  }
  const env = await sbx.commands.run('echo $GREETING $(pwd)', { envs: { GREETING: 'hola' }, cwd: '/home/user/sub' }).catch((e) => errInfo(e));
  out.envCwd = env.stdout ?? env;
  await sbx.files.makeDir('/home/user/sub2');
  out.envCwd2 = (await sbx.commands.run('echo $GREETING $(pwd)', { envs: { GREETING: 'hola' }, cwd: '/home/user/sub2' })).stdout;
  const again = await Sandbox.connect(sbx.sandboxId);
  out.connected = (await again.commands.run('echo again')).stdout;
  const streamed = [];
  await sbx.commands.run('for i in 1 2 3; do echo line$i; done', { onStdout: (d) => streamed.push(d) });
  out.streamed = streamed.join('');
  const bg = await sbx.commands.run('read a; echo got:$a', { background: true, stdin: true });
  out.listedProcs = (await sbx.commands.list()).map((p) => p.pid).includes(bg.pid);
  await sbx.commands.sendStdin(bg.pid, 'ping\n');
  out.stdinEcho = (await bg.wait()).stdout;
  const sleeper = await sbx.commands.run('sleep 600', { background: true });
  out.killProc = await sbx.commands.kill(sleeper.pid);
  try { await sleeper.wait(); out.killedExit = 'none'; } catch (e) { out.killedExit = e instanceof CommandExitError ? 'CommandExitError' : errInfo(e); }

  const w = await sbx.files.write('/home/user/dir/hello.txt', 'hi from the sdk');
  out.written = w.path;
  out.read = await sbx.files.read('/home/user/dir/hello.txt');
  out.catRead = (await sbx.commands.run('cat dir/hello.txt')).stdout;
  out.listed = (await sbx.files.list('/home/user/dir')).map((e) => `${e.name}:${e.type}`);
  out.exists = await sbx.files.exists('dir/hello.txt');
  out.made = await sbx.files.makeDir('/home/user/made');
  await sbx.files.rename('/home/user/dir/hello.txt', '/home/user/made/moved.txt');
  out.info = (await sbx.files.getInfo('/home/user/made/moved.txt')).size;
  await sbx.files.remove('/home/user/made');
  out.existsAfterRemove = await sbx.files.exists('/home/user/made');
  try { await sbx.files.read('/home/user/nope.txt'); out.readMissing = 'no error'; } catch (e) { out.readMissing = e.constructor.name; }

  const page = await Sandbox.list({ query: { metadata: { suite: 'e2b-flow' } } }).nextItems();
  out.inList = page.map((s) => s.sandboxId).includes(sbx.sandboxId);
  const before = (await sbx.getInfo()).endAt.getTime();
  await sbx.setTimeout(600_000);
  const info = await sbx.getInfo();
  out.timeoutExtendedMs = info.endAt.getTime() - before;
  out.templateId = info.templateId;
  out.metadata = info.metadata;
  out.running = await sbx.isRunning();
  out.killed = await sbx.kill();
  out.runningAfter = await sbx.isRunning().catch((e) => errInfo(e));
  try { await Sandbox.getInfo(sbx.sandboxId); out.gone = 'still there'; } catch (e) { out.gone = e instanceof SandboxNotFoundError ? 'SandboxNotFoundError' : errInfo(e); }
  out.killAgain = await Sandbox.kill(sbx.sandboxId);
  try { await sbx.commands.run('echo after'); out.runAfterKill = 'ran'; } catch (e) { out.runAfterKill = e.constructor.name; }
}

async function interpreter() {
  const t0 = performance.now();
  const sbx = await CodeInterpreter.create({ timeoutMs: 120_000 });
  out.id = sbx.sandboxId;
  const e1 = await sbx.runCode('x = 41\nprint("side effect")\nx + 1');
  out.firstResultMs = performance.now() - t0;
  out.first = { text: e1.text, stdout: e1.logs.stdout, error: e1.error ?? null };
  const e2 = await sbx.runCode('x * 2');
  out.second = e2.text;
  const e3 = await sbx.runCode('1/0');
  out.error = e3.error ? { name: e3.error.name, value: e3.error.value } : null;
  out.t = {}; const tt = () => Math.round(performance.now() - t0);
  out.t.before = tt();
  const own = await sbx.createCodeContext({ cwd: '/home/user' });
  out.t.created = tt();
  out.contextCwd = own.cwd;
  out.ownContext = (await sbx.runCode('import os\nx = 7\nos.getcwd()', { context: own })).text;
  out.separate = (await sbx.runCode('x', { context: own })).text + ' ' + (await sbx.runCode('x')).text;
  out.t.ran = tt();
  await sbx.removeCodeContext(own);
  out.t.removed = tt();
  try { await sbx.runCode('x', { context: own }); out.afterRemove = 'ran'; } catch (e) { out.afterRemove = e.constructor.name; }
  out.t.after = tt();
  // What E2B's code interpreter has: pandas and matplotlib (a figure
  // drawn and saved off-screen).
  const d = await sbx.runCode([
    'import pandas, matplotlib',
    'import matplotlib.pyplot as plt',
    'df = pandas.DataFrame({"a": [1, 2, 3]})',
    'df.plot().get_figure().savefig("/tmp/plot.png")',
    'f"{pandas.__version__} {matplotlib.__version__} {int(df.a.sum())}"',
  ].join('\n'));
  out.data = { text: d.text, error: d.error ? `${d.error.name}: ${d.error.value}` : null };
  out.t.data = tt();
  out.template = (await sbx.getInfo()).templateId;
  out.killed = await sbx.kill();
}

// host runs in host-based mode: E2B_SANDBOX_URL unset, every port of the
// sandbox at https://{port}-{id}.{domain} (the domain create answered),
// the test's CA in NODE_EXTRA_CA_CERTS and its names resolved to loopback
// by test/e2bclient/loopback-dns.mjs.
async function host() {
  const sbx = await CodeInterpreter.create({ timeoutMs: 120_000 });
  out.id = sbx.sandboxId;
  out.host = sbx.getHost(49983);
  out.run = (await sbx.commands.run('echo host-mode')).stdout;
  await sbx.files.write('/home/user/h.txt', 'via host');
  out.read = await sbx.files.read('/home/user/h.txt');
  out.code = (await sbx.runCode('21 * 2')).text;
  // A server on another port, reached by getHost(port) with the traffic token.
  await sbx.commands.run('cd /workspace && exec python3 -m http.server 8000', { background: true });
  const url = `https://${sbx.getHost(8000)}/h.txt`;
  const headers = { 'e2b-traffic-access-token': sbx.trafficAccessToken };
  for (let i = 0; i < 200 && out.portBody === undefined; i++) {
    const r = await fetch(url, { headers }).catch(() => null);
    if (r && r.status === 200) out.portBody = await r.text();
    else await new Promise((res) => setTimeout(res, 100));
  }
  out.portNoToken = (await fetch(url)).status;
  out.portOtherToken = (await fetch(url, { headers: { 'e2b-traffic-access-token': 'x' + sbx.trafficAccessToken } })).status;
  out.killed = await sbx.kill();
}

// warm creates a sandbox (warm from a pool in TestCompatWarmStartAndFiles)
// and reads its startedAt in getInfo and the list, then writes files where
// code written for E2B puts them besides /home/user: /tmp and the sandbox
// user's own home, and reads them back through the SDK and a command.
async function warm() {
  out.before = Date.now();
  const sbx = await Sandbox.create('base', { timeoutMs: 120_000 });
  out.after = Date.now();
  out.id = sbx.sandboxId;
  out.startedAt = (await sbx.getInfo()).startedAt.getTime();
  out.listedStartedAt = (await Sandbox.list().nextItems()).find((s) => s.sandboxId === sbx.sandboxId)?.startedAt?.getTime();
  const home = (await sbx.commands.run('printf %s "$HOME"')).stdout;
  out.home = home;
  await sbx.files.write('/tmp/e2b/a.txt', 'in tmp');
  await sbx.files.write(`${home}/.e2brc`, 'in home');
  out.tmpRead = await sbx.files.read('/tmp/e2b/a.txt');
  out.homeRead = await sbx.files.read(`${home}/.e2brc`);
  out.tmpList = (await sbx.files.list('/tmp/e2b')).map((e) => `${e.name}:${e.type}`);
  out.cat = (await sbx.commands.run(`cat /tmp/e2b/a.txt ${home}/.e2brc`)).stdout;
  for (const [k, p] of [['etc', '/etc/passwd'], ['proc', '/proc/self/root/etc/passwd'], ['agent', '/run/genesis/agent.sock']]) {
    try { await sbx.files.read(p); out[k] = 'read'; } catch (e) { out[k] = e.constructor.name; }
  }
  out.killed = await sbx.kill();
}

try {
  if (process.argv[2] === 'interpreter') await interpreter();
  else if (process.argv[2] === 'warm') await warm();
  else if (process.argv[2] === 'host') await host();
  else await core();
} catch (e) {
  out.error = errInfo(e);
  out.stack = e?.stack;
}
// Exit once written: an SDK error path that leaves a response body unread
// (the interpreter's non-404 errors) would hold the process on an idle
// keep-alive socket.
process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0));
