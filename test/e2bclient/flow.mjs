// Drives the unmodified E2B SDKs through their core flows against the
// service's /e2b adapter and prints what each step saw as one JSON object
// (test/e2e/e2b_test.go asserts on it). Environment: E2B_API_URL,
// E2B_SANDBOX_URL, E2B_API_KEY as a user of the SDK sets them; argv[2] is
// the flow: "core" (e2b), "interpreter" (@e2b/code-interpreter), "host",
// "warm", "pause", "pausecode", "snapshot", "autopause" or "volumes".
import { Sandbox, CommandExitError, SandboxNotFoundError, Volume } from 'e2b';
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

const sleep = (ms) => new Promise((res) => setTimeout(res, ms));
// count reads the counter a background command writes once a second
// (renamed into place, so that no read sees it half written).
const count = async (sbx) => Number((await sbx.files.read('/home/user/count')).trim() || 0);

// pause starts a background command counting once a second, writes a
// file, pauses the sandbox (betaPause is the same call), reads its state
// (getInfo, the list by state, isRunning), sleeps, connects (which
// resumes it) and reads the file and the counter twice: a counter that
// goes on from where it was paused kept its process and memory.
async function pause() {
  const sbx = await Sandbox.create('base', { timeoutMs: 300_000, metadata: { suite: 'e2b-pause' } });
  out.id = sbx.sandboxId;
  await sbx.files.write('/home/user/before.txt', 'written before the pause');
  await sbx.commands.run('i=0; while true; do i=$((i+1)); echo $i > count.new; mv count.new count; sleep 1; done', { background: true, timeoutMs: 0 });
  for (let i = 0; i < 200 && (await count(sbx).catch(() => 0)) < 3; i++) await sleep(100);
  // ranMs: how long the counter may have run between its two reads (from
  // this read until the pause answers, from the connect until the read
  // after it), never through the sleep between.
  let t = performance.now();
  out.before = await count(sbx);
  const pauseAt = performance.now();
  out.paused = await sbx.pause();
  out.pauseMs = performance.now() - pauseAt;
  out.ranMs = performance.now() - t;
  out.stateAfterPause = (await sbx.getInfo()).state;
  out.listedPaused = (await Sandbox.list({ query: { state: ['paused'], metadata: { suite: 'e2b-pause' } } }).nextItems()).map((s) => `${s.sandboxId}:${s.state}`);
  out.listedRunning = (await Sandbox.list({ query: { state: ['running'], metadata: { suite: 'e2b-pause' } } }).nextItems()).map((s) => s.sandboxId);
  out.runningWhilePaused = await sbx.isRunning();
  out.pauseAgain = await sbx.betaPause();
  await sleep(6000); // a counter that went on while paused would show it
  t = performance.now();
  const again = await Sandbox.connect(sbx.sandboxId, { timeoutMs: 120_000 });
  out.connectMs = performance.now() - t;
  out.stateAfterConnect = (await again.getInfo()).state;
  out.runningAfterConnect = await again.isRunning();
  out.afterConnect = await count(again);
  out.ranMs += performance.now() - t;
  out.read = await again.files.read('/home/user/before.txt');
  out.cat = (await again.commands.run('cat before.txt')).stdout;
  await sleep(3000);
  out.later = await count(again);
  out.killed = await again.kill();
}

// pausecode keeps x = 41 in the code interpreter's default context,
// pauses the sandbox, connects (resuming it) and runs x + 1 there.
async function pausecode() {
  const sbx = await CodeInterpreter.create({ timeoutMs: 300_000 });
  out.id = sbx.sandboxId;
  out.set = (await sbx.runCode('x = 41\nx')).text;
  out.paused = await sbx.pause();
  const again = await CodeInterpreter.connect(sbx.sandboxId);
  const r = await again.runCode('x + 1');
  out.after = r.error ? { name: r.error.name } : r.text;
  out.killed = await again.kill();
}

// snapshot writes a file, takes a snapshot (the sandbox runs on), lists
// it, creates a sandbox from it, forks the sandbox twice, and deletes the
// snapshot (twice: the second answers false).
async function snapshot() {
  const sbx = await Sandbox.create('base', { timeoutMs: 300_000 });
  out.id = sbx.sandboxId;
  await sbx.files.write('/home/user/snap.txt', 'in the snapshot');
  const snap = await sbx.createSnapshot({ name: 'e2b-flow' });
  out.snapshotId = snap.snapshotId;
  out.names = snap.names;
  out.runsOn = (await sbx.commands.run('cat snap.txt')).stdout;
  out.listed = (await sbx.listSnapshots().nextItems()).map((s) => s.snapshotId);
  await sbx.files.write('/home/user/snap.txt', 'changed after the snapshot');
  const made = await Sandbox.create(snap.snapshotId, { timeoutMs: 120_000 });
  out.madeId = made.sandboxId;
  out.made = await made.files.read('/home/user/snap.txt');
  out.madeTemplate = (await made.getInfo()).templateId;
  out.madeKilled = await made.kill();
  const forks = await sbx.fork({ count: 2, timeoutMs: 120_000 });
  out.forks = [];
  for (const f of forks) {
    if (f instanceof Error) { out.forks.push({ error: errInfo(f) }); continue; }
    const r = (await f.commands.run(`cat snap.txt; echo; echo ${f.sandboxId} > own.txt; cat own.txt`)).stdout;
    out.forks.push({ id: f.sandboxId, out: r });
    await f.kill();
  }
  out.parentAfterFork = (await sbx.commands.run('cat snap.txt; echo; cat own.txt 2>/dev/null || echo no-own')).stdout;
  out.deleted = await Sandbox.deleteSnapshot(snap.snapshotId);
  out.deletedAgain = await Sandbox.deleteSnapshot(snap.snapshotId);
  out.killed = await sbx.kill();
}

// autopause creates a sandbox whose timeout pauses it (autoResume), writes
// a file, waits for its state to read paused after the timeout, then runs
// a command, which wakes it.
async function autopause() {
  const sbx = await Sandbox.create('base', { timeoutMs: 5_000, lifecycle: { onTimeout: 'pause', autoResume: true } });
  out.id = sbx.sandboxId;
  await sbx.files.write('/home/user/auto.txt', 'before the timeout');
  out.lifecycle = (await sbx.getInfo()).lifecycle;
  const t0 = performance.now();
  for (let i = 0; i < 600; i++) {
    out.state = (await Sandbox.getInfo(sbx.sandboxId)).state;
    if (out.state === 'paused') break;
    await sleep(100);
  }
  out.pausedAfterMs = performance.now() - t0;
  out.run = (await sbx.commands.run('cat auto.txt')).stdout;
  out.stateAfterRun = (await sbx.getInfo()).state;
  out.killed = await sbx.kill();
}

// volumes creates a named volume, seeds it through the content API
// (content), mounts it into a sandbox that writes to it (a content write
// beside that writer is refused), reads it from a second sandbox after the
// first is gone and through the content API, and deletes it; deleting it
// while mounted is refused.
// FLOW_VOLUME names the volume.
async function volumes() {
  const vol = await Volume.create(process.env.FLOW_VOLUME);
  out.volumeId = vol.volumeId;
  out.volumeName = vol.name;
  out.listed = (await Volume.list()).map((v) => `${v.name}:${v.volumeId}`);
  const info = await Volume.getInfo(vol.volumeId);
  // create and getInfo answer the same token, the service's own kind.
  out.tokenShape = info.token.startsWith('gst_v2.') && info.token === vol.token ? 'gst_v2' : `other: ${info.token.slice(0, 8)}`;
  out.info = { volumeId: info.volumeId, name: info.name };
  await content(vol);
  const a = await Sandbox.create('base', { timeoutMs: 120_000, volumeMounts: { '/mnt/data': vol } });
  out.writerId = a.sandboxId;
  out.mounts = (await a.getInfo()).volumeMounts;
  out.seenInside = (await a.commands.run('cat /mnt/data/seed/hello.txt; stat -c %a /mnt/data/seed/hello.txt')).stdout;
  out.write = (await a.commands.run('echo kept > /mnt/data/note.txt && cat /mnt/data/note.txt')).stdout;
  try {
    await vol.writeFile('/beside-the-writer.txt', 'no');
    out.writeWhileMounted = 'written';
  } catch (e) {
    out.writeWhileMounted = errInfo(e);
  }
  try {
    await Volume.destroy(vol.volumeId);
    out.destroyWhileMounted = 'deleted';
  } catch (e) {
    out.destroyWhileMounted = errInfo(e);
  }
  await a.kill();
  const b = await Sandbox.create('base', { timeoutMs: 120_000, volumeMounts: { '/mnt/again': vol.name } });
  out.readerId = b.sandboxId;
  out.read = (await b.commands.run('cat /mnt/again/note.txt')).stdout;
  await b.kill();
  // The writer's file through the content API, with a new connection.
  const again = await Volume.connect(vol.volumeId);
  out.readNote = await again.readFile('/note.txt');
  await again.remove('/made');
  out.removed = await again.exists('/made/deep');
  out.destroyed = await Volume.destroy(vol.volumeId);
  out.destroyedAgain = await Volume.destroy(vol.volumeId);
  try {
    await Volume.getInfo(vol.volumeId);
    out.gone = 'still there';
  } catch (e) {
    out.gone = errInfo(e).name;
  }
}

// content drives the volume content API with the volume's token: write,
// read, makeDir, list, getInfo, exists, updateMetadata; a path leaving the
// volume and a wrong token are refused.
async function content(vol) {
  const w = await vol.writeFile('/seed/hello.txt', 'from the sdk\n');
  out.contentWrite = { path: w.path, type: w.type, size: w.size };
  out.contentRead = await vol.readFile('/seed/hello.txt');
  out.contentBytes = Array.from(await vol.readFile('/seed/hello.txt', { format: 'bytes' })).length;
  out.contentMakeDir = (await vol.makeDir('/made/deep', { force: true })).type;
  out.contentList = (await vol.list('/', { depth: 2 })).map((e) => `${e.type}:${e.path}`).sort();
  const st = await vol.getInfo('/seed/hello.txt');
  out.contentInfo = { name: st.name, type: st.type, size: st.size, mtimeIsDate: st.mtime instanceof Date && !Number.isNaN(st.mtime.getTime()) };
  out.contentExists = [await vol.exists('/seed/hello.txt'), await vol.exists('/nope')];
  out.contentMode = (await vol.updateMetadata('/seed/hello.txt', { mode: 0o640 })).mode;
  try {
    await vol.readFile('/../../etc/passwd');
    out.contentEscape = 'read';
  } catch (e) {
    out.contentEscape = errInfo(e);
  }
  try {
    await vol.getInfo('/missing.txt');
    out.contentMissing = 'found';
  } catch (e) {
    out.contentMissing = errInfo(e).name;
  }
  try {
    await new Volume(vol.volumeId, vol.name, vol.token + 'x').readFile('/seed/hello.txt');
    out.contentBadToken = 'read';
  } catch (e) {
    out.contentBadToken = errInfo(e);
  }
}

try {
  if (process.argv[2] === 'volumes') await volumes();
  else if (process.argv[2] === 'interpreter') await interpreter();
  else if (process.argv[2] === 'pause') await pause();
  else if (process.argv[2] === 'pausecode') await pausecode();
  else if (process.argv[2] === 'snapshot') await snapshot();
  else if (process.argv[2] === 'autopause') await autopause();
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
