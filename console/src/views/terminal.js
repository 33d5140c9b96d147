import { h, replace, note } from '../dom.js';
import { get, post, enc } from '../api.js';
import { VT } from './vt.js';

// The terminal: the service's terminal WebSocket, opened with a single-use
// ticket (a browser cannot put the Authorization header on a WebSocket, and
// the API key never goes into a URL), drawn by vt.js: full-screen programs
// (vi, top, less) work. Type into the screen (it takes focus) or send a
// line from the input below it.
export async function terminalView(root, { params: [id] }) {
  const sb = await get(`/v1/sandboxes/${enc(id)}`);
  const out = h('div', { class: 'vt', id: 'term', tabindex: '0', role: 'log', 'aria-label': 'Terminal screen; type here to send keys' });
  const status = h('p', { id: 'term-status', role: 'status' }, 'Connecting…');
  const line = h('input', { id: 'term-input', name: 'line', autocomplete: 'off', spellcheck: 'false', 'aria-label': 'Command line: Enter sends it with a newline' });
  const form = h('form', { class: 'inline term-line' }, h('label', { for: 'term-input' }, '$'), line, h('button', { type: 'submit' }, 'Send'));
  replace(root,
    h('div', { class: 'title-row' }, h('h1', {}, `Terminal of ${sb.id}`), h('a', { class: 'button', href: `#/sandboxes/${enc(sb.id)}` }, 'Sandbox')),
    status, out, form);

  let ws = null, closed = false;
  const enc8 = new TextEncoder();
  const send = (s) => { if (ws && ws.readyState === WebSocket.OPEN) ws.send(enc8.encode(s)); };
  const { cols, rows } = fit(out);
  const vt = new VT(cols, rows, { reply: send });
  out.dataset.rows = String(rows);
  vt.render(out);
  form.addEventListener('submit', (ev) => { ev.preventDefault(); send(line.value + '\r'); line.value = ''; });
  out.addEventListener('keydown', (ev) => {
    const k = keyBytes(ev, vt.appCursor);
    if (k !== null) { ev.preventDefault(); send(k); }
  });
  out.addEventListener('paste', (ev) => { ev.preventDefault(); send(ev.clipboardData.getData('text')); });
  let frame = 0;
  const draw = () => {
    frame = 0;
    const atEnd = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
    if (vt.render(out) && atEnd) out.scrollTop = out.scrollHeight;
  };
  const onResize = () => {
    const size = fit(out);
    if (size.cols === vt.cols && size.rows === vt.rows) return;
    vt.resize(size.cols, size.rows);
    out.dataset.rows = String(size.rows);
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'resize', cols: size.cols, rows: size.rows }));
    if (!frame) frame = requestAnimationFrame(draw);
  };
  window.addEventListener('resize', onResize);

  try {
    const t = await post(`/v1/sandboxes/${enc(sb.id)}/terminal/tickets`, {});
    const u = new URL(`/v1/sandboxes/${enc(sb.id)}/terminal`, location.href);
    u.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
    u.searchParams.set('ticket', t.ticket);
    u.searchParams.set('cols', String(cols));
    u.searchParams.set('rows', String(rows));
    ws = new WebSocket(u);
  } catch (e) {
    replace(status, note(`${e.message}${e.code ? ` (${e.code})` : ''}`, 'error'));
    return () => window.removeEventListener('resize', onResize);
  }
  ws.binaryType = 'arraybuffer';
  const dec = new TextDecoder();
  ws.onmessage = (m) => {
    if (typeof m.data === 'string') {
      const msg = JSON.parse(m.data);
      if (msg.type === 'hello') replace(status, `Connected to ${msg.terminal}${msg.writer ? '' : ' (watching: another connection types)'}`);
      if (msg.type === 'exit') replace(status, `The shell ended (${msg.reason}${msg.code !== undefined ? ' ' + msg.code : ''}${msg.signal ? ' ' + msg.signal : ''})`);
      return;
    }
    vt.write(dec.decode(new Uint8Array(m.data), { stream: true }));
    if (!frame) frame = requestAnimationFrame(draw);
  };
  ws.onclose = (ev) => { if (!closed) replace(status, note(`Disconnected (${ev.code}${ev.reason ? ' ' + ev.reason : ''})`, ev.code === 1000 ? 'info' : 'error')); };
  out.focus();
  return () => { closed = true; window.removeEventListener('resize', onResize); ws.close(1000, 'view closed'); };
}

// fit is the terminal size that fills el's width (and most of the window's
// height), from the size of one character cell.
function fit(el) {
  const probe = h('span', { class: 'vt-probe' }, 'W'.repeat(10));
  el.appendChild(probe);
  const r = probe.getBoundingClientRect();
  probe.remove();
  const cw = r.width / 10 || 8, ch = r.height || 16;
  const cols = Math.max(40, Math.min(300, Math.floor((el.clientWidth - 16) / cw)));
  const rows = Math.max(10, Math.min(100, Math.floor((window.innerHeight - 280) / ch)));
  return { cols, rows };
}

// keyBytes maps a key press to the bytes a terminal sends.
export function keyBytes(ev, appCursor = false) {
  if (ev.metaKey) return null;
  const arrow = appCursor ? '\x1bO' : '\x1b[';
  const special = { Enter: '\r', Backspace: '\x7f', Tab: '\t', Escape: '\x1b', ArrowUp: `${arrow}A`, ArrowDown: `${arrow}B`, ArrowRight: `${arrow}C`, ArrowLeft: `${arrow}D`,
    Home: `${arrow}H`, End: `${arrow}F`, Delete: '\x1b[3~', PageUp: '\x1b[5~', PageDown: '\x1b[6~', Insert: '\x1b[2~' };
  if (special[ev.key]) return special[ev.key];
  if (ev.ctrlKey && ev.key.length === 1 && /[a-z@\[\\\]^_]/i.test(ev.key)) return String.fromCharCode(ev.key.toUpperCase().charCodeAt(0) & 0x1f);
  if (!ev.ctrlKey && !ev.altKey && ev.key.length === 1) return ev.key;
  return null;
}
