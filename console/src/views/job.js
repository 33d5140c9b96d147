import { h, replace, badge, note, fmtTime, saveBlob, exitBadge, exitSummary, jobWhat } from '../dom.js';
import { get, request, enc, ApiError } from '../api.js';

// The job's log streams as Server-Sent Events read with fetch (EventSource
// cannot send the Authorization header). Every event's id is a cursor: after
// a dropped connection (or a pause) the stream resumes with ?cursor= at the
// last event shown, so no line is lost or shown twice.
export async function jobView(root, { params: [id] }) {
  const job = await get(`/v1/jobs/${enc(id)}`);
  const out = h('pre', { class: 'log', id: 'log', tabindex: '0', 'aria-label': 'Job output', 'aria-live': 'off' });
  const status = h('p', { id: 'log-status', role: 'status' }, 'Connecting…');
  const exit = h('div', { id: 'exit' });
  const chunks = [];
  const decoders = { stdout: new TextDecoder(), stderr: new TextDecoder() };
  let cursor = 0, ended = false, paused = false, reconnects = 0, ctrl = null, gone = false, gen = 0;

  const pauseBtn = h('button', { type: 'button', id: 'pause', 'aria-pressed': 'false', onclick: () => {
    paused = !paused;
    pauseBtn.setAttribute('aria-pressed', String(paused));
    pauseBtn.textContent = paused ? 'Resume' : 'Pause';
    if (paused && ctrl) ctrl.abort();
    if (!paused && !ended) follow();
  } }, 'Pause');
  const dl = h('button', { type: 'button', id: 'download', onclick: () => {
    saveBlob(new Blob(chunks.map((c) => c.bytes)), `${id}.log`);
  } }, 'Download output');

  function show(stream, bytes) {
    chunks.push({ stream, bytes });
    const text = decoders[stream].decode(bytes, { stream: true });
    if (!text) return;
    const atEnd = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
    out.append(h('span', { class: stream }, text));
    if (atEnd) out.scrollTop = out.scrollHeight;
  }

  function onEvent(ev) {
    if (ev.id !== '') {
      const n = Number(ev.id);
      if (n <= cursor && ev.event !== 'exit') return; // already shown
      cursor = n;
    }
    if (ev.event === 'stdout' || ev.event === 'stderr') {
      const d = JSON.parse(ev.data);
      show(ev.event, Uint8Array.from(atob(d.data), (c) => c.charCodeAt(0)));
    } else if (ev.event === 'truncated') {
      const d = JSON.parse(ev.data);
      out.append(h('span', { class: 'marker' }, `\n[${d.stream} reached its cap of ${d.kept} bytes; the rest was dropped]\n`));
    } else if (ev.event === 'exit') {
      const d = JSON.parse(ev.data);
      ended = true;
      const fin = { ...job, ...d };
      replace(stateBadge, exitBadge(fin));
      replace(exit, h('p', { class: 'card' }, 'Ended ', exitBadge(fin), ` ${exitSummary(fin)}`,
        d.duration_ms !== undefined ? ` in ${d.duration_ms} ms` : '', d.error ? ` – ${d.error}` : ''));
      exit.dataset.code = String(d.exit_code ?? '');
      exit.dataset.reason = d.exit_reason || '';
    }
  }

  async function follow() {
    const my = ++gen;
    while (!ended && !paused && !gone && my === gen) {
      ctrl = new AbortController();
      replace(status, reconnects ? `Following (reconnected ${reconnects}×, from byte ${cursor})` : 'Following');
      try {
        const resp = await request('GET', `/v1/jobs/${enc(id)}/logs`, { query: { follow: 'true', cursor }, as: 'response', signal: ctrl.signal, headers: { Accept: 'text/event-stream' } });
        await readSSE(resp.body, onEvent);
      } catch (e) {
        if (e.name === 'AbortError') { if (paused || gone) break; }
        else if (e instanceof ApiError && e.status !== 0 && e.status < 500) { replace(status, note(e.message, 'error')); return; }
      }
      if (ended || paused || gone || my !== gen) break;
      reconnects++;
      out.dataset.reconnects = String(reconnects);
      replace(status, `Connection lost; resuming from byte ${cursor}…`);
      await new Promise((r) => setTimeout(r, Math.min(5000, 500 * reconnects)));
    }
    if (my !== gen) return;
    if (ended) replace(status, 'Finished');
    else if (paused) replace(status, `Paused at byte ${cursor}`);
  }

  const what = jobWhat(job);
  const stateBadge = h('span', { id: 'job-state' }, exitBadge(job));
  replace(root,
    h('div', { class: 'title-row' }, h('h1', {}, `Job ${job.id}`),
      h('div', { class: 'actions' }, pauseBtn, dl, h('a', { class: 'button', href: `#/sandboxes/${enc(job.sandbox_id)}` }, 'Sandbox'))),
    h('p', {}, stateBadge, ' ', h('code', {}, what), ` · ${job.mode} · started ${fmtTime(job.started_at || job.created_at)}`),
    h('p', { class: 'legend' }, h('span', { class: 'stdout' }, 'stdout'), ' ', h('span', { class: 'stderr' }, 'stderr')),
    status, out, exit);
  follow();
  return () => { gone = true; if (ctrl) ctrl.abort(); };
}

// readSSE parses a text/event-stream body, calling onEvent({id, event,
// data}) per event; comments (keepalives) are skipped.
export async function readSSE(body, onEvent) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let ev = { id: '', event: 'message', data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i).replace(/\r$/, '');
      buf = buf.slice(i + 1);
      if (line === '') {
        if (ev.data.length || ev.event !== 'message') onEvent({ id: ev.id, event: ev.event, data: ev.data.join('\n') });
        ev = { id: '', event: 'message', data: [] };
        continue;
      }
      if (line[0] === ':') continue;
      const c = line.indexOf(':');
      const k = c < 0 ? line : line.slice(0, c);
      const v = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
      if (k === 'data') ev.data.push(v);
      else if (k === 'event') ev.event = v;
      else if (k === 'id') ev.id = v;
    }
  }
}
