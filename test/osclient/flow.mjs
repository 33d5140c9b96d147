// Drives the unmodified OpenSandbox SDK through its core flow against the
// service's /opensandbox adapter and prints what each step saw as one JSON
// object (test/e2e/opensandbox_test.go asserts on it). Environment:
// OPEN_SANDBOX_DOMAIN and OPEN_SANDBOX_API_KEY as a user of the SDK sets
// them; argv[2] is the image, argv[3] the flow: "core" (the default),
// "warm", "pause" or "volumes" (argv[4]: the volume's name).
import { Sandbox, SandboxManager } from '@alibaba-group/opensandbox';

const out = {};
const errInfo = (e) => ({ name: e?.constructor?.name, message: String(e?.message ?? e), status: e?.statusCode, code: e?.error?.code });
const image = process.argv[2] || 'ubuntu';

async function core() {
  const t0 = performance.now();
  const sbx = await Sandbox.create({ image, timeoutSeconds: 300, metadata: { suite: 'os-flow' }, env: { GREETING: 'hola' } });
  out.createMs = performance.now() - t0;
  out.id = sbx.id;
  const first = await sbx.commands.run('echo first');
  out.firstOutputMs = performance.now() - t0;
  out.first = first.logs.stdout.map((m) => m.text);
  const r = await sbx.commands.run('echo hello; echo oops >&2; pwd; echo $GREETING');
  out.run = { stdout: r.logs.stdout.map((m) => m.text), stderr: r.logs.stderr.map((m) => m.text), exitCode: r.exitCode, error: r.error ?? null };
  const bad = await sbx.commands.run('echo bad >&2; exit 3');
  out.fail = { exitCode: bad.exitCode, errorName: bad.error?.name, errorValue: bad.error?.value, stderr: bad.logs.stderr.map((m) => m.text) };
  const streamed = [];
  await sbx.commands.run('for i in 1 2 3; do echo line$i; done', { workingDirectory: '/tmp' }, { onStdout: (m) => streamed.push(m.text) });
  out.streamed = streamed;
  const cwd = await sbx.commands.run('pwd', { workingDirectory: '/tmp' });
  out.cwd = cwd.logs.stdout.map((m) => m.text);

  await sbx.files.writeFiles([{ path: '/workspace/dir/hello.txt', data: 'hi from the sdk', mode: 644 }]);
  out.read = await sbx.files.readFile('/workspace/dir/hello.txt');
  out.range = await sbx.files.readFile('/workspace/dir/hello.txt', { range: 'bytes=3-6' });
  out.catRead = (await sbx.commands.run('cat dir/hello.txt')).logs.stdout.map((m) => m.text);
  const infos = await sbx.files.getFileInfo(['/workspace/dir/hello.txt']);
  const fi = infos['/workspace/dir/hello.txt'];
  out.info = fi ? { size: fi.size, type: fi.type, mode: fi.mode } : null;
  out.listed = (await sbx.files.listDirectory({ path: '/workspace/dir' })).map((e) => `${e.path}:${e.type}`);
  await sbx.files.createDirectories([{ path: '/workspace/made', mode: 755 }]);
  await sbx.files.moveFiles([{ src: '/workspace/dir/hello.txt', dest: '/workspace/made/moved.txt' }]);
  out.moved = await sbx.files.readFile('/workspace/made/moved.txt');
  out.found = (await sbx.files.search({ path: '/workspace', pattern: '*.txt' })).map((e) => e.path);
  await sbx.files.deleteFiles(['/workspace/made/moved.txt']);
  try { await sbx.files.readFile('/workspace/made/moved.txt'); out.readDeleted = 'no error'; } catch (e) { out.readDeleted = errInfo(e); }

  const mgr = SandboxManager.create();
  const page = await mgr.listSandboxInfos({ metadata: { suite: 'os-flow' } });
  out.inList = page.items.map((s) => s.id).includes(sbx.id);
  out.listState = page.items.find((s) => s.id === sbx.id)?.status?.state;
  out.pagination = page.pagination;
  const info = await sbx.getInfo();
  out.state = info.status.state;
  out.metadata = info.metadata;
  const before = info.expiresAt.getTime();
  const renewed = await sbx.renew(1800);
  out.renewedBy = renewed.expiresAt.getTime() - before;
  out.healthy = await sbx.isHealthy();
  await sbx.kill();
  try { const gone = await sbx.getInfo(); out.afterKill = gone.status.state; out.afterKillReason = gone.status.reason; } catch (e) { out.afterKill = errInfo(e); }
  try { await sbx.commands.run('echo after'); out.runAfterKill = 'ran'; } catch (e) { out.runAfterKill = errInfo(e); }
  try { await Sandbox.create({ image: 'no-such-image:1', skipHealthCheck: true }); out.unknownImage = 'created'; } catch (e) { out.unknownImage = errInfo(e); }
  await sbx.close();
  await mgr.close?.();
}

// warm creates a sandbox of argv[2] (a profile's name, warm from a pool
// in TestCompatWarmStartAndFiles) and reads its createdAt in getInfo and
// the list, then writes files where code written for OpenSandbox puts them
// besides /workspace: /tmp and the user's home, and reads them back.
async function warm() {
  out.before = Date.now();
  const sbx = await Sandbox.create({ image, timeoutSeconds: 300, metadata: { suite: 'os-warm' } });
  out.after = Date.now();
  out.id = sbx.id;
  out.createdAt = new Date((await sbx.getInfo()).createdAt).getTime();
  const mgr = SandboxManager.create();
  const page = await mgr.listSandboxInfos({ metadata: { suite: 'os-warm' } });
  out.listedCreatedAt = new Date(page.items.find((s) => s.id === sbx.id)?.createdAt).getTime();
  const home = (await sbx.commands.run('echo "$HOME"')).logs.stdout.map((m) => m.text).join('');
  out.home = home;
  await sbx.files.writeFiles([{ path: '/tmp/os/a.txt', data: 'in tmp' }, { path: `${home}/.osrc`, data: 'in home' }]);
  out.tmpRead = await sbx.files.readFile('/tmp/os/a.txt');
  out.homeRead = await sbx.files.readFile(`${home}/.osrc`);
  out.tmpList = (await sbx.files.listDirectory({ path: '/tmp/os' })).map((e) => `${e.path}:${e.type}`);
  out.cat = (await sbx.commands.run(`cat /tmp/os/a.txt; echo; cat ${home}/.osrc`)).logs.stdout.map((m) => m.text);
  for (const [k, p] of [['etc', '/etc/passwd'], ['proc', '/proc/self/root/etc/passwd'], ['agent', '/run/genesis/agent.sock']]) {
    try { await sbx.files.readFile(p); out[k] = 'read'; } catch (e) { out[k] = errInfo(e).status; }
  }
  await sbx.kill();
  await sbx.close();
  await mgr.close?.();
}

const sleep = (ms) => new Promise((res) => setTimeout(res, ms));
// count reads the counter a background command writes once a second
// (renamed into place, so that no read sees it half written).
const count = async (sbx) => Number((await sbx.files.readFile('/workspace/count')).trim() || 0);

// pause starts a background command counting once a second, writes a
// file, pauses the sandbox, reads its state (getInfo, the list by state,
// the health check, a command), sleeps, resumes it (the SDK's resume, a
// new connected Sandbox) and reads the file and the counter twice: a
// counter that goes on from where it was paused kept its process and
// memory.
async function pause() {
  const sbx = await Sandbox.create({ image, timeoutSeconds: 300, metadata: { suite: 'os-pause' } });
  out.id = sbx.id;
  await sbx.files.writeFiles([{ path: '/workspace/before.txt', data: 'written before the pause' }]);
  await sbx.commands.run('i=0; while true; do i=$((i+1)); echo $i > /workspace/count.new; mv /workspace/count.new /workspace/count; sleep 1; done', { background: true });
  for (let i = 0; i < 200 && (await count(sbx).catch(() => 0)) < 3; i++) await sleep(100);
  // ranMs: how long the counter may have run between its two reads (from
  // this read until the pause answers, from the resume until the read
  // after it), never through the sleep between.
  let t = performance.now();
  out.before = await count(sbx);
  const pauseAt = performance.now();
  await sbx.pause();
  out.pauseMs = performance.now() - pauseAt;
  out.ranMs = performance.now() - t;
  out.stateAfterPause = (await sbx.getInfo()).status.state;
  const mgr = SandboxManager.create();
  out.listedPaused = (await mgr.listSandboxInfos({ states: ['Paused'], metadata: { suite: 'os-pause' } })).items.map((s) => `${s.id}:${s.status.state}`);
  out.listedRunning = (await mgr.listSandboxInfos({ states: ['Running'], metadata: { suite: 'os-pause' } })).items.map((s) => s.id);
  out.healthyWhilePaused = await sbx.isHealthy();
  try { await sbx.commands.run('echo x'); out.runWhilePaused = 'ran'; } catch (e) { out.runWhilePaused = errInfo(e); }
  await sbx.pause(); // again: succeeds
  await sleep(4000); // a counter that went on while paused would show it
  t = performance.now();
  const resumed = await sbx.resume();
  out.resumeMs = performance.now() - t;
  out.stateAfterResume = (await resumed.getInfo()).status.state;
  out.healthyAfterResume = await resumed.isHealthy();
  out.afterResume = await count(resumed);
  out.ranMs += performance.now() - t;
  out.read = await resumed.files.readFile('/workspace/before.txt');
  out.cat = (await resumed.commands.run('cat /workspace/before.txt')).logs.stdout.map((m) => m.text);
  await sleep(3000);
  out.later = await count(resumed);
  // A paused sandbox can be killed.
  await resumed.pause();
  t = performance.now();
  await resumed.kill();
  out.killPausedMs = performance.now() - t;
  out.afterKill = (await resumed.getInfo()).status.state;
  await sbx.close();
  await resumed.close();
  await mgr.close?.();
}

// volumes mounts a named volume (the pvc backend, made by the first
// create) writable into one sandbox, which writes to it; a second writer
// is refused; after a kill, a read-only mount in a new sandbox reads the
// file and cannot write; a host path backend is refused.
async function volumes() {
  const claimName = process.argv[4];
  const vol = (readOnly) => [{ name: 'data', pvc: { claimName, storage: '16Mi' }, mountPath: '/mnt/data', readOnly }];
  const w = await Sandbox.create({ image, timeoutSeconds: 300, volumes: vol(false) });
  out.id = w.id;
  out.write = (await w.commands.run('echo from-sdk > /mnt/data/sdk.txt && cat /mnt/data/sdk.txt')).logs.stdout.map((m) => m.text);
  try { await Sandbox.create({ image, timeoutSeconds: 300, volumes: vol(false), skipHealthCheck: true }); out.second = 'created'; } catch (e) { out.second = errInfo(e); }
  await w.kill();
  const r = await Sandbox.create({ image, timeoutSeconds: 300, volumes: vol(true) });
  out.readerId = r.id;
  out.read = (await r.commands.run('cat /mnt/data/sdk.txt')).logs.stdout.map((m) => m.text);
  out.roWrite = (await r.commands.run('touch /mnt/data/x 2>&1 || echo refused')).logs.stdout.map((m) => m.text);
  await r.kill();
  try {
    await Sandbox.create({ image, timeoutSeconds: 300, skipHealthCheck: true, volumes: [{ name: 'h', host: { path: '/etc' }, mountPath: '/mnt/h', readOnly: true }] });
    out.host = 'created';
  } catch (e) { out.host = errInfo(e); }
  await w.close?.();
  await r.close?.();
}

try {
  if (process.argv[3] === 'warm') await warm();
  else if (process.argv[3] === 'volumes') await volumes();
  else if (process.argv[3] === 'pause') await pause();
  else await core();
} catch (e) {
  out.error = errInfo(e);
  out.stack = e?.stack;
}
process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0));
