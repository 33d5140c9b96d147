// Unit tests of the console's pure parts (node --test; make test runs them).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Screen } from '../src/views/terminal.js';
import { readSSE } from '../src/views/job.js';
import { parseMetrics, histogram } from '../src/metrics.js';

test('Screen keeps text, handles CR, backspace and erase-line, drops other escapes', () => {
  const s = new Screen();
  s.write('$ ech\x1b[1;32mo\x1b[0m hi\r\n');
  s.write('hi\r\nabc\b\bX\r\n');
  s.write('progress 10%\rprogress 99%\x1b[K\r\n');
  s.write('\x1b]0;title\x07done \x1b[');   // an escape split across writes
  s.write('2Kagain');
  assert.equal(s.text(), '$ echo hi\nhi\naXc\nprogress 99%\n     again');
});

test('Screen keeps at most max lines', () => {
  const s = new Screen(3);
  s.write('1\n2\n3\n4\n5');
  assert.equal(s.text(), '3\n4\n5');
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
