// Unit tests of the console's pure parts (node --test; make test runs them).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { VT, xterm256 } from '../src/views/vt.js';
import { readSSE } from '../src/views/job.js';
import { diffLines } from '../src/views/changes.js';
import { parseMetrics, histogram } from '../src/metrics.js';
import { imageProgress } from '../src/views/system.js';
import { exitSummary, lifetime, newestFirst, jobWhat } from '../src/dom.js';
import { summary } from '../src/player/player.js';
import { holds, restoredText, suspensionText, sessionsText, madeText, wokenText, setFlash, takeFlash } from '../src/views/snapshots.js';
import { fmtMB, fmtBytes, usedText, holdersText } from '../src/views/volumes.js';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

test('VT keeps text, handles CR, backspace, erase-line and colours', () => {
  const s = new VT(40, 5);
  s.write('$ ech\x1b[1;32mo\x1b[0m hi\r\n');
  s.write('hi\r\nabc\b\bX\r\n');
  s.write('progress 10%\rprogress 99%\x1b[K\r\n');
  s.write('\x1b]0;title\x07done \x1b[');   // an escape split across writes
  s.write('2Kagain');
  assert.equal(s.text(), '$ echo hi\nhi\naXc\nprogress 99%\n     again');
  assert.equal(s.main[0][5][1].fg, 2);
  assert.equal(s.main[0][5][1].bold, true);
  assert.equal(s.main[0][6][1].fg, -1);
});

test('VT scrolls into its scrollback, keeps at most its limit', () => {
  const s = new VT(10, 3, { scrollback: 2 });
  s.write('1\r\n2\r\n3\r\n4\r\n5\r\n6');
  assert.equal(s.text(), '2\n3\n4\n5\n6'); // 1 fell out of the scrollback
  assert.equal(s.back.length, 2);
});

test('VT moves the cursor, erases the screen and draws like a full-screen program', () => {
  const s = new VT(20, 4);
  s.write('\x1b[?1049h\x1b[2J\x1b[H');               // alternate screen, cleared
  s.write('\x1b[2;5Hmiddle\x1b[4;1Hstatus line');      // absolute moves
  s.write('\x1b[1;1Htop\x1b[2;5H\x1b[2Pxx');           // delete two chars, overwrite
  assert.equal(s.text(), 'top\n    xxle\n\nstatus line');
  s.write('\x1b[2;1H\x1b[L');                          // insert a line at row 2
  assert.equal(s.text(), 'top\n\n    xxle');          // the status line fell off
  s.write('\x1b[?1049l');                                // back to the normal screen
  assert.equal(s.text(), '');
  s.write('kept');
  assert.equal(s.text(), 'kept');
});

test('VT scroll regions, reverse index and insert/erase characters', () => {
  const s = new VT(10, 5);
  s.write('a\r\nb\r\nc\r\nd\r\ne');
  s.write('\x1b[2;4r\x1b[4;1H\n');                      // region rows 2-4; a line feed at its bottom
  assert.equal(s.text(), 'a\nc\nd\n\ne');
  s.write('\x1b[2;1H\x1bM');                             // reverse index at the region's top
  assert.equal(s.text(), 'a\n\nc\nd\ne');
  s.write('\x1b[r\x1b[5;1H\x1b[3@XY\x1b[1X');            // insert 3 blanks, erase one char
  assert.equal(s.text(), 'a\n\nc\nd\nXY e');
});

test('VT answers cursor position reports and handles 256 and true colours, wraps at the edge', () => {
  const replies = [];
  const s = new VT(5, 3, { reply: (r) => replies.push(r) });
  s.write('abcdefg');
  assert.equal(s.text(), 'abcde\nfg');
  s.write('\x1b[6n');
  assert.deepEqual(replies, ['\x1b[2;3R']);
  s.write('\x1b[38;5;196mR\x1b[48;2;1;2;3mT');
  assert.equal(s.main[1][2][1].fg, 196);
  assert.equal(s.main[1][3][1].bg, 'rgb(1, 2, 3)');
  assert.equal(xterm256(196), 'rgb(255, 0, 0)');
  assert.equal(xterm256(232), 'rgb(8, 8, 8)');
});

function stream(chunks) {
  return new ReadableStream({
    start(c) { for (const x of chunks) c.enqueue(new TextEncoder().encode(x)); c.close(); },
  });
}

test('readSSE parses events split anywhere, skips comments, joins data lines', async () => {
  const events = [];
  await readSSE(stream(['id: 21\nevent: std', 'out\ndata: {"offset":0,"data":"aGkK"}\n\n: keepalive\n\n',
    'id: 42\r\nevent: exit\r\ndata: a\r\ndata: b\r\n\r\n']), (e) => events.push(e));
  assert.deepEqual(events, [
    { id: '21', event: 'stdout', data: '{"offset":0,"data":"aGkK"}' },
    { id: '42', event: 'exit', data: 'a\nb' },
  ]);
});

test('parseMetrics and histogram turn cumulative buckets into counts', () => {
  const m = parseMetrics(`# HELP x
genesis_sandboxes{state="ready"} 3
genesis_exec_duration_seconds_bucket{runtime="runc",le="0.01"} 2
genesis_exec_duration_seconds_bucket{runtime="runc",le="0.1"} 5
genesis_exec_duration_seconds_bucket{runtime="runc",le="+Inf"} 6
genesis_exec_duration_seconds_count{runtime="runc"} 6
`);
  assert.equal(m.find((s) => s.name === 'genesis_sandboxes').value, 3);
  assert.deepEqual(histogram(m, 'genesis_exec_duration_seconds', 'runtime'), {
    runc: [{ le: 0.01, count: 2 }, { le: 0.1, count: 3 }, { le: Infinity, count: 1 }],
  });
});

test('exitSummary says why a job ended, not only its code', () => {
  assert.equal(exitSummary({ state: 'succeeded', exit_reason: 'exited', exit_code: 0 }), 'exit 0');
  assert.equal(exitSummary({ state: 'failed', exit_reason: 'exited', exit_code: 3 }), 'exit 3');
  assert.equal(exitSummary({ state: 'failed', exit_reason: 'timeout', exit_code: 124, timeout_ms: 500 }), 'timed out after 500 ms (exit 124)');
  assert.equal(exitSummary({ state: 'failed', exit_reason: 'timeout', timeout_ms: 60000 }), 'timed out after 60 s');
  assert.equal(exitSummary({ state: 'failed', exit_reason: 'oom', exit_code: 137 }), 'killed: out of memory (exit 137)');
  assert.equal(exitSummary({ state: 'canceled', exit_reason: 'canceled', exit_code: 143 }), 'canceled (exit 143)');
  assert.equal(exitSummary({ state: 'failed', exit_reason: 'signal', signal: 'SIGSEGV' }), 'killed by SIGSEGV');
  assert.equal(exitSummary({ state: 'lost', exit_reason: 'lost' }), 'lost (the service lost track of it)');
  assert.equal(exitSummary({ state: 'running' }), '');
});

test('lifetime: an ended sandbox says when it ended, a live one when it expires', () => {
  const soon = new Date(Date.now() + 4 * 60000).toISOString();
  const ago = new Date(Date.now() - 3 * 60000).toISOString();
  assert.deepEqual(lifetime({ state: 'destroyed', expires_at: soon, updated_at: ago }), { label: 'Ended', at: ago, text: 'ended 3 min ago' });
  assert.equal(lifetime({ state: 'failed', expires_at: soon, updated_at: ago }).label, 'Ended');
  assert.deepEqual(lifetime({ state: 'ready', expires_at: soon, updated_at: ago }), { label: 'Expires', at: soon, text: 'in 4 min' });
  assert.equal(lifetime({ state: 'ready' }).text, 'never');
});

test('newestFirst orders by creation, newest first; jobWhat is the script or the command', () => {
  const l = [{ id: 'a', created_at: '2026-01-01T10:00:00Z' }, { id: 'c', created_at: '2026-01-01T12:00:00Z' }, { id: 'b', created_at: '2026-01-01T11:00:00Z' }];
  assert.deepEqual(newestFirst(l).map((x) => x.id), ['c', 'b', 'a']);
  assert.deepEqual(l.map((x) => x.id), ['a', 'c', 'b']); // the input is left alone
  assert.equal(jobWhat({ script: 'echo hi' }), 'echo hi');
  assert.equal(jobWhat({ command: ['ls', '-la'] }), 'ls -la');
});

test('the player summarises interrupts without undefined', () => {
  const ev = (kind, data) => ({ kind, data, actor: 'system', time: '2026-01-01T00:00:00Z' });
  assert.equal(summary(ev('interrupt.stepped', { action: 'exec' })), 'let exec through (one step)');
  assert.equal(summary(ev('interrupt.step', { state: 'paused', steps: 1 })), 'step → paused (1 step left)');
  assert.equal(summary(ev('interrupt.pause', { state: 'paused', steps: 0 })), 'pause → paused');
  for (const kind of ['interrupt.stepped', 'interrupt.resume', 'interrupt.abort', 'job.started', 'annotation', 'task.status', 'control.requested', 'no.such.kind']) {
    assert.doesNotMatch(summary(ev(kind, {})), /undefined/, kind);
  }
});

test('a suspension and a restore say what they kept', () => {
  const since = new Date(Date.now() - 2 * 60000).toISOString();
  const paused = suspensionText({ state: 'paused', suspension: { resume_state: 'ready', memory: false, since } });
  assert.match(paused, /^paused since .+ \(2 min ago\); its processes are frozen and its memory kept$/);
  assert.match(suspensionText({ state: 'hibernated', suspension: { memory: true, since } }), /^hibernated since .*files, processes and memory are kept on disk: it wakes where it was$/);
  assert.match(suspensionText({ state: 'hibernated', suspension: { memory: false, since, operation: 'waking' } }), /it wakes with its files only \(its processes start afresh\); waking now$/);
  assert.equal(suspensionText({ state: 'ready' }), '');
  assert.equal(holds({ memory: true }), 'files, processes and memory');
  assert.equal(holds({ memory: false }), 'files only');
  assert.equal(restoredText(true), 'with its processes and memory');
  assert.equal(restoredText(false), 'with its files only (its processes started afresh)');
  assert.equal(sessionsText({ ses_b: 'ses_y', ctx_a: 'ctx_x' }), 'ctx_a → ctx_x, ses_b → ses_y');
  assert.equal(sessionsText(undefined), '');
  assert.equal(wokenText(false, {}), 'Resumed.');
  assert.equal(wokenText(true, {}), 'Woken.');
  assert.equal(wokenText(true, { memory_restored: false }), 'Woken with its files only (its processes started afresh).');
  assert.equal(madeText({ memory_restored: true, sessions_from_snapshot: { ses_a: 'ses_b' } }, 'Made from snapshot base'),
    'Made from snapshot base with its processes and memory. Its sessions and code contexts: ses_a → ses_b.');
  assert.equal(madeText({}, 'Made'), 'Made with its files only (its processes started afresh).');
  // A note is for the one sandbox's next rendering only.
  setFlash('sbx_1', 'Paused.');
  assert.equal(takeFlash('sbx_2'), '');
  assert.equal(takeFlash('sbx_1'), 'Paused.');
  assert.equal(takeFlash('sbx_1'), '');
});

// Nothing the API answers (tenant, actor and holder names, metadata, file
// names, output) may be parsed as markup: the console builds the DOM with
// createElement and text nodes only.
test('no console source uses an HTML sink', () => {
  const files = [];
  const walk = (d) => { for (const f of readdirSync(d, { withFileTypes: true })) { if (f.isDirectory()) walk(join(d, f.name)); else if (f.name.endsWith('.js')) files.push(join(d, f.name)); } };
  walk(new URL('../src', import.meta.url).pathname);
  assert.ok(files.length > 10);
  for (const f of files) {
    assert.doesNotMatch(readFileSync(f, 'utf8'), /\.(innerHTML|outerHTML)\b|insertAdjacentHTML|document\.write|createContextualFragment|DOMParser|srcdoc/, f);
  }
});

test('imageProgress says where each image stands', () => {
  assert.deepEqual(imageProgress({ status: 'present' }), { percent: null, text: 'ready', detail: '' });
  assert.deepEqual(imageProgress({ status: 'building', build: { state: 'building', percent: 42, summary: 'building 42%: packages (2/4) 120/456 packages', detail: 'Unpacking less' } }),
    { percent: 42, text: '42%: packages (2/4) 120/456 packages', detail: 'Unpacking less' });
  assert.deepEqual(imageProgress({ status: 'building', build: { state: 'waiting', percent: 0, summary: 'waiting: x', detail: 'another process builds this image' } }),
    { percent: 0, text: 'waiting', detail: 'another process builds this image' });
  assert.equal(imageProgress({ status: 'queued', build: { state: 'queued', percent: 0 } }).percent, null);
  assert.deepEqual(imageProgress({ status: 'failed', build: { state: 'failed', error: 'debootstrap: exit status 1\nlog' } }),
    { percent: null, text: 'the build failed', detail: 'debootstrap: exit status 1' });
  assert.deepEqual(imageProgress({ status: 'not_built', build_command: 'make images' }), { percent: null, text: 'not built', detail: 'make images' });
});

test('diffLines classifies a git diff: headers, hunks, added and removed lines, no-newline notes', () => {
  const d = 'diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n\\ No newline at end of file\n';
  assert.deepEqual(diffLines(d).map((l) => l.cls), ['meta', 'meta', 'meta', 'hunk', 'context', 'del', 'add', 'note']);
  assert.equal(diffLines(d)[2].text, '+++ b/x'); // a header, not an added line
  assert.deepEqual(diffLines(''), []);
});

test('volumes: sizes in MiB and GiB, and who holds a volume', () => {
  assert.equal(fmtMB(512), '512 MiB');
  assert.equal(fmtMB(2048), '2 GiB');
  assert.equal(fmtMB(1536), '1.5 GiB');
  assert.equal(fmtMB(0), '–');
  assert.equal(holdersText({ mounts: [] }), 'not mounted');
  assert.equal(holdersText({}), 'not mounted');
  assert.equal(holdersText({ mounts: [{ sandbox_id: 'sb_a', path: '/mnt/data', read_only: false }] }), 'written by sb_a at /mnt/data');
  assert.equal(holdersText({ mounts: [{ sandbox_id: 'sb_a', path: '/mnt/r', read_only: true }] }), 'read by sb_a at /mnt/r');
  assert.equal(holdersText({ mounts: [{ sandbox_id: 'sb_a', path: '/mnt/r', read_only: true }, { sandbox_id: 'sb_b', path: '/mnt/r', read_only: true }] }), 'read by 2 sandboxes');
});

test('volumes: used bytes against the size', () => {
  assert.equal(fmtBytes(0), '0 B');
  assert.equal(fmtBytes(1023), '1023 B');
  assert.equal(fmtBytes(12 * 1024), '12 KiB');
  assert.equal(fmtBytes(3.5 * 1048576), '3.5 MiB');
  assert.equal(fmtBytes(undefined), '–');
  assert.equal(usedText({ size_mb: 1024, used_bytes: 256 * 1048576 }), '256 MiB / 1 GiB (25%)');
  assert.equal(usedText({ size_mb: 64, used_bytes: 0 }), '0 B / 64 MiB (0%)');
  assert.equal(usedText({ size_mb: 64 }), '– / 64 MiB');
});
