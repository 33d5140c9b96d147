import { h, replace, note } from '../dom.js';
import { get, post, enc } from '../api.js';

// The terminal: the service's terminal WebSocket, opened with a single-use
// ticket (a browser cannot put the Authorization header on a WebSocket, and
// the API key never goes into a URL). This is a plain line screen, not a
// full terminal emulator: it keeps text, carriage returns, backspaces and
// erase-line, and drops other escape sequences (colours, cursor moves), so
// full-screen programs (vi, top) do not draw correctly here.
export async function terminalView(root, { params: [id] }) {
  const sb = await get(`/v1/sandboxes/${enc(id)}`);
  const screen = new Screen();
  const out = h('pre', { class: 'log term', id: 'term', tabindex: '0', 'aria-label': 'Terminal output; type here to send keys', 'aria-live': 'polite' });
  const status = h('p', { id: 'term-status', role: 'status' }, 'Connecting…');
  const line = h('input', { id: 'term-input', name: 'line', autocomplete: 'off', spellcheck: 'false', 'aria-label': 'Command line: Enter sends it with a newline' });
  const form = h('form', { class: 'inline term-line' }, h('label', { for: 'term-input' }, '$'), line, h('button', { type: 'submit' }, 'Send'));
  replace(root,
    h('div', { class: 'title-row' }, h('h1', {}, `Terminal of ${sb.id}`), h('a', { class: 'button', href: `#/sandboxes/${enc(sb.id)}` }, 'Sandbox')),
    status, out, form);

  let ws = null, closed = false;
  const enc8 = new TextEncoder();
  const send = (s) => { if (ws && ws.readyState === WebSocket.OPEN) ws.send(enc8.encode(s)); };
  form.addEventListener('submit', (ev) => { ev.preventDefault(); send(line.value + '\r'); line.value = ''; });
  out.addEventListener('keydown', (ev) => {
    const k = keyBytes(ev);
    if (k !== null) { ev.preventDefault(); send(k); }
  });
  out.addEventListener('paste', (ev) => { ev.preventDefault(); send(ev.clipboardData.getData('text')); });

  try {
    const t = await post(`/v1/sandboxes/${enc(sb.id)}/terminal/tickets`, {});
    const u = new URL(`/v1/sandboxes/${enc(sb.id)}/terminal`, location.href);
    u.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
    u.searchParams.set('ticket', t.ticket);
    u.searchParams.set('cols', '100');
    u.searchParams.set('rows', '30');
    ws = new WebSocket(u);
  } catch (e) {
    replace(status, note(`${e.message}${e.code ? ` (${e.code})` : ''}`, 'error'));
    return;
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
    screen.write(dec.decode(new Uint8Array(m.data), { stream: true }));
    out.textContent = screen.text();
    out.scrollTop = out.scrollHeight;
  };
  ws.onclose = (ev) => { if (!closed) replace(status, note(`Disconnected (${ev.code}${ev.reason ? ' ' + ev.reason : ''})`, ev.code === 1000 ? 'info' : 'error')); };
  line.focus();
  return () => { closed = true; ws.close(1000, 'view closed'); };
}

// keyBytes maps a key press to the bytes a terminal sends.
function keyBytes(ev) {
  if (ev.metaKey) return null;
  const special = { Enter: '\r', Backspace: '\x7f', Tab: '\t', Escape: '\x1b', ArrowUp: '\x1b[A', ArrowDown: '\x1b[B', ArrowRight: '\x1b[C', ArrowLeft: '\x1b[D', Home: '\x1b[H', End: '\x1b[F', Delete: '\x1b[3~' };
  if (special[ev.key]) return special[ev.key];
  if (ev.ctrlKey && ev.key.length === 1 && /[a-z@\[\\\]^_]/i.test(ev.key)) return String.fromCharCode(ev.key.toUpperCase().charCodeAt(0) & 0x1f);
  if (!ev.ctrlKey && !ev.altKey && ev.key.length === 1) return ev.key;
  return null;
}

// Screen keeps the last lines of a terminal's text.
export class Screen {
  constructor(max = 2000) { this.lines = ['']; this.col = 0; this.max = max; this.pending = ''; }
  write(s) {
    s = this.pending + s;
    this.pending = '';
    for (let i = 0; i < s.length; i++) {
      const c = s[i];
      if (c === '\x1b') {
        const rest = s.slice(i);
        const m = rest.match(/^\x1b\[([0-9;?]*)[ -\/]*([@-~])/) || rest.match(/^\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)/) || rest.match(/^\x1b[()#][0-9A-Za-z]/) || rest.match(/^\x1b[=>78DEHMNOc]/);
        if (!m) { if (rest.length < 32) { this.pending = rest; return; } continue; }
        if (m[2] === 'K') {
          // Erase in line: 0 (or none) to its end, 1 to the cursor, 2 all of it; the cursor stays.
          if (m[1] === '2') this.cur = '';
          else if (m[1] === '1') this.cur = ' '.repeat(this.col) + this.cur.slice(this.col);
          else this.cur = this.cur.slice(0, this.col);
        }
        if (m[2] === 'C') this.col += Number(m[1] || 1);
        if (m[2] === 'D') this.col = Math.max(0, this.col - Number(m[1] || 1));
        if (m[2] === 'J' && m[1] === '2') { this.lines = ['']; this.col = 0; }
        i += m[0].length - 1;
      } else if (c === '\n') {
        this.lines.push(''); this.col = 0;
        if (this.lines.length > this.max) this.lines.shift();
      } else if (c === '\r') this.col = 0;
      else if (c === '\b') this.col = Math.max(0, this.col - 1);
      else if (c === '\x07' || c < ' ') continue;
      else {
        const l = this.cur.padEnd(this.col, ' ');
        this.cur = l.slice(0, this.col) + c + l.slice(this.col + 1);
        this.col++;
      }
    }
  }
  get cur() { return this.lines[this.lines.length - 1]; }
  set cur(v) { this.lines[this.lines.length - 1] = v; }
  text() { return this.lines.join('\n'); }
}
