// vt.js: a terminal screen for the console's terminal view, written for
// it (no dependency): an xterm-compatible subset that full-screen programs
// (vi, top, less, htop) use — cursor moves, erase, insert and delete of
// lines and characters, scroll regions, the alternate screen, colours (16,
// 256 and true colour), bold, underline and inverse — and a scrollback for
// the normal screen. It renders with DOM nodes and CSS classes; a colour
// outside the 16 is set through the CSSOM (element.style), which the
// console's Content-Security-Policy allows (it forbids style elements and
// attributes in markup, not style set by script).

const DEFAULT = Object.freeze({ fg: -1, bg: -1, bold: false, dim: false, italic: false, underline: false, inverse: false });

function sameAttr(a, b) {
  return a === b || (a.fg === b.fg && a.bg === b.bg && a.bold === b.bold && a.dim === b.dim &&
    a.italic === b.italic && a.underline === b.underline && a.inverse === b.inverse);
}

function blankRow(cols, attr = DEFAULT) {
  const r = new Array(cols);
  for (let i = 0; i < cols; i++) r[i] = [' ', attr];
  return r;
}

// VT is a terminal screen of cols × rows. write() takes the program's
// output (text, decoded); reply(s) is called with what the terminal
// answers (cursor position reports); text() is the screen's text.
export class VT {
  constructor(cols = 100, rows = 30, { scrollback = 1000, reply = () => {} } = {}) {
    this.cols = cols; this.rows = rows; this.maxBack = scrollback; this.reply = reply;
    this.reset();
  }

  reset() {
    this.main = Array.from({ length: this.rows }, () => blankRow(this.cols));
    this.alt = null;           // the alternate screen while it is shown
    this.back = [];            // scrollback of the main screen (oldest first)
    this.x = 0; this.y = 0; this.wrapNext = false;
    this.attr = DEFAULT;
    this.top = 0; this.bottom = this.rows - 1;
    this.saved = { x: 0, y: 0, attr: DEFAULT };
    this.cursorVisible = true; this.appCursor = false; this.autowrap = true;
    this.state = 'ground'; this.buf = '';
    this.drawn = new WeakMap(); // scrollback row → its drawn div
    this.dirty = true;
  }

  get screen() { return this.alt || this.main; }

  write(s) {
    for (const c of s) this.feed(c);
    this.dirty = true;
  }

  feed(c) {
    switch (this.state) {
      case 'esc': return this.escape(c);
      case 'csi':
        if (c >= '@' && c <= '~') { this.state = 'ground'; this.csi(this.buf, c); this.buf = ''; return; }
        if (this.buf.length > 64) { this.state = 'ground'; this.buf = ''; return; }
        this.buf += c; return;
      case 'osc': // a title or the like: ends with BEL or ESC \
        if (c === '\x07') { this.state = 'ground'; return; }
        if (c === '\x1b') { this.state = 'oscEsc'; return; }
        return;
      case 'oscEsc': this.state = c === '\\' ? 'ground' : 'osc'; return;
      case 'charset': this.state = 'ground'; return; // ESC ( B and friends: one more byte
      default: break;
    }
    const code = c.codePointAt(0);
    if (code < 0x20 || code === 0x7f) return this.control(c);
    this.print(c);
  }

  control(c) {
    switch (c) {
      case '\x1b': this.state = 'esc'; return;
      case '\r': this.x = 0; this.wrapNext = false; return;
      case '\n': case '\v': case '\f': this.index(); return;
      case '\b': if (this.x > 0) this.x--; this.wrapNext = false; return;
      case '\t': this.x = Math.min(this.cols - 1, (Math.floor(this.x / 8) + 1) * 8); return;
      default: // BEL, SO, SI, NUL, DEL: nothing to draw
    }
  }

  escape(c) {
    this.state = 'ground';
    switch (c) {
      case '[': this.state = 'csi'; this.buf = ''; return;
      case ']': this.state = 'osc'; return;
      case '(': case ')': case '*': case '+': case '#': this.state = 'charset'; return;
      case '7': this.saveCursor(); return;
      case '8': this.restoreCursor(); return;
      case 'D': this.index(); return;
      case 'E': this.x = 0; this.index(); return;
      case 'M': this.reverseIndex(); return;
      case 'c': this.reset(); return;
      default: // = > and others: keypad modes, nothing to draw
    }
  }

  print(c) {
    if (this.wrapNext && this.autowrap) { this.x = 0; this.index(); }
    this.wrapNext = false;
    this.screen[this.y][this.x] = [c, this.attr];
    if (this.x === this.cols - 1) this.wrapNext = true;
    else this.x++;
  }

  // index moves down a line, scrolling the region at its bottom.
  index() {
    this.wrapNext = false;
    if (this.y === this.bottom) this.scrollUp(1);
    else if (this.y < this.rows - 1) this.y++;
  }

  reverseIndex() {
    this.wrapNext = false;
    if (this.y === this.top) this.scrollDown(1);
    else if (this.y > 0) this.y--;
  }

  scrollUp(n) {
    const s = this.screen;
    for (let i = 0; i < n; i++) {
      const [gone] = s.splice(this.top, 1);
      s.splice(this.bottom, 0, blankRow(this.cols, this.bgAttr()));
      if (!this.alt && this.top === 0) {
        this.back.push(gone);
        if (this.back.length > this.maxBack) this.back.shift();
      }
    }
  }

  scrollDown(n) {
    const s = this.screen;
    for (let i = 0; i < n; i++) {
      s.splice(this.bottom, 1);
      s.splice(this.top, 0, blankRow(this.cols, this.bgAttr()));
    }
  }

  // bgAttr is what erased cells get: the current background only.
  bgAttr() { return this.attr.bg === -1 && !this.attr.inverse ? DEFAULT : { ...DEFAULT, bg: this.attr.bg }; }

  saveCursor() { this.saved = { x: this.x, y: this.y, attr: this.attr }; }
  restoreCursor() { this.x = this.saved.x; this.y = this.saved.y; this.attr = this.saved.attr; this.wrapNext = false; }

  clamp() {
    this.x = Math.max(0, Math.min(this.cols - 1, this.x));
    this.y = Math.max(0, Math.min(this.rows - 1, this.y));
    this.wrapNext = false;
  }

  erase(row, from, to) {
    const r = this.screen[row];
    const a = this.bgAttr();
    for (let i = Math.max(0, from); i < Math.min(this.cols, to); i++) r[i] = [' ', a];
  }

  csi(body, final) {
    const priv = body.startsWith('?');
    const ps = (priv ? body.slice(1) : body).replace(/[^0-9;:]/g, '').split(';').map((p) => (p === '' ? NaN : parseInt(p, 10)));
    const p = (i, d = 1) => (Number.isNaN(ps[i]) || ps[i] === undefined || (ps[i] === 0 && d === 1) ? d : ps[i]);
    const s = this.screen;
    switch (final) {
      case 'A': this.y = Math.max(this.y < this.top ? 0 : this.top, this.y - p(0)); this.clamp(); return;
      case 'B': this.y = Math.min(this.y > this.bottom ? this.rows - 1 : this.bottom, this.y + p(0)); this.clamp(); return;
      case 'C': this.x += p(0); this.clamp(); return;
      case 'D': this.x -= p(0); this.clamp(); return;
      case 'E': this.y += p(0); this.x = 0; this.clamp(); return;
      case 'F': this.y -= p(0); this.x = 0; this.clamp(); return;
      case 'G': case '`': this.x = p(0) - 1; this.clamp(); return;
      case 'd': this.y = p(0) - 1; this.clamp(); return;
      case 'H': case 'f': this.y = p(0) - 1; this.x = p(1) - 1; this.clamp(); return;
      case 'J': {
        const m = p(0, 0);
        if (m === 0) { this.erase(this.y, this.x, this.cols); for (let r = this.y + 1; r < this.rows; r++) this.erase(r, 0, this.cols); }
        if (m === 1) { this.erase(this.y, 0, this.x + 1); for (let r = 0; r < this.y; r++) this.erase(r, 0, this.cols); }
        if (m === 2) for (let r = 0; r < this.rows; r++) this.erase(r, 0, this.cols);
        if (m === 3) this.back = [];
        return;
      }
      case 'K': {
        const m = p(0, 0);
        if (m === 0) this.erase(this.y, this.x, this.cols);
        if (m === 1) this.erase(this.y, 0, this.x + 1);
        if (m === 2) this.erase(this.y, 0, this.cols);
        return;
      }
      case 'L': case 'M': {
        if (this.y < this.top || this.y > this.bottom) return;
        const n = Math.min(p(0), this.bottom - this.y + 1);
        for (let i = 0; i < n; i++) {
          if (final === 'L') { s.splice(this.bottom, 1); s.splice(this.y, 0, blankRow(this.cols, this.bgAttr())); }
          else { s.splice(this.y, 1); s.splice(this.bottom, 0, blankRow(this.cols, this.bgAttr())); }
        }
        this.x = 0; this.wrapNext = false;
        return;
      }
      case 'P': { const r = s[this.y]; const n = Math.min(p(0), this.cols - this.x); r.splice(this.x, n); for (let i = 0; i < n; i++) r.push([' ', this.bgAttr()]); return; }
      case '@': { const r = s[this.y]; const n = Math.min(p(0), this.cols - this.x); for (let i = 0; i < n; i++) r.splice(this.x, 0, [' ', this.bgAttr()]); r.length = this.cols; return; }
      case 'X': this.erase(this.y, this.x, this.x + p(0)); return;
      case 'S': this.scrollUp(p(0)); return;
      case 'T': this.scrollDown(p(0)); return;
      case 'r': {
        const top = p(0) - 1, bottom = (Number.isNaN(ps[1]) || ps[1] === undefined ? this.rows : ps[1]) - 1;
        if (top < bottom && bottom < this.rows) { this.top = top; this.bottom = bottom; this.x = 0; this.y = 0; }
        return;
      }
      case 's': this.saveCursor(); return;
      case 'u': this.restoreCursor(); return;
      case 'm': return this.sgr(ps);
      case 'n':
        if (p(0, 0) === 6) this.reply(`\x1b[${this.y + 1};${this.x + 1}R`);
        if (p(0, 0) === 5) this.reply('\x1b[0n');
        return;
      case 'c': if (!priv && p(0, 0) === 0) this.reply('\x1b[?1;2c'); return;
      case 'h': case 'l': if (priv) this.modes(ps, final === 'h'); return;
      default: // window ops and the rest: nothing to draw
    }
  }

  modes(ps, on) {
    for (const m of ps) {
      switch (m) {
        case 1: this.appCursor = on; break;
        case 7: this.autowrap = on; break;
        case 25: this.cursorVisible = on; break;
        case 47: case 1047: case 1049:
          if (on && !this.alt) {
            if (m === 1049) this.saveCursor();
            this.alt = Array.from({ length: this.rows }, () => blankRow(this.cols));
          } else if (!on && this.alt) {
            this.alt = null;
            if (m === 1049) this.restoreCursor();
          }
          break;
        default: // bracketed paste, mouse: not used here
      }
    }
  }

  sgr(ps) {
    if (ps.length === 0 || (ps.length === 1 && Number.isNaN(ps[0]))) { this.attr = DEFAULT; return; }
    const a = { ...this.attr };
    for (let i = 0; i < ps.length; i++) {
      const n = Number.isNaN(ps[i]) ? 0 : ps[i];
      if (n === 0) Object.assign(a, DEFAULT);
      else if (n === 1) a.bold = true;
      else if (n === 2) a.dim = true;
      else if (n === 3) a.italic = true;
      else if (n === 4) a.underline = true;
      else if (n === 7) a.inverse = true;
      else if (n === 22) { a.bold = false; a.dim = false; }
      else if (n === 23) a.italic = false;
      else if (n === 24) a.underline = false;
      else if (n === 27) a.inverse = false;
      else if (n >= 30 && n <= 37) a.fg = n - 30;
      else if (n >= 90 && n <= 97) a.fg = n - 90 + 8;
      else if (n === 39) a.fg = -1;
      else if (n >= 40 && n <= 47) a.bg = n - 40;
      else if (n >= 100 && n <= 107) a.bg = n - 100 + 8;
      else if (n === 49) a.bg = -1;
      else if (n === 38 || n === 48) {
        let c = -1;
        if (ps[i + 1] === 5) { c = ps[i + 2] & 255; i += 2; }
        else if (ps[i + 1] === 2) { c = `rgb(${ps[i + 2] & 255}, ${ps[i + 3] & 255}, ${ps[i + 4] & 255})`; i += 4; }
        if (n === 38) a.fg = c; else a.bg = c;
      }
    }
    this.attr = sameAttr(a, DEFAULT) ? DEFAULT : Object.freeze(a);
  }

  // resize keeps the top-left of the screen and the cursor inside it.
  resize(cols, rows) {
    const fit = (scr) => {
      const out = scr.slice(Math.max(0, scr.length - rows)).map((r) => {
        const c = r.slice(0, cols);
        while (c.length < cols) c.push([' ', DEFAULT]);
        return c;
      });
      while (out.length < rows) out.push(blankRow(cols));
      return out;
    };
    const shift = Math.max(0, this.rows - rows);
    this.main = fit(this.main);
    if (this.alt) this.alt = fit(this.alt);
    this.cols = cols; this.rows = rows;
    this.top = 0; this.bottom = rows - 1;
    this.y -= Math.min(shift, this.y);
    this.clamp();
    this.dirty = true;
  }

  // lines are the rows to show: the scrollback (normal screen only) and
  // the screen.
  lines() { return this.alt ? this.alt : this.back.concat(this.main); }

  // text is the text of the scrollback and the screen, trailing blanks cut.
  text() {
    const rows = this.lines().map((r) => r.map(([c]) => c).join('').replace(/ +$/, ''));
    while (rows.length && rows[rows.length - 1] === '') rows.pop();
    return rows.join('\n');
  }

  // render draws the screen into el (one div per row, one span per run of
  // cells that look the same, the cursor marked) when it changed.
  render(el, doc = el.ownerDocument) {
    if (!this.dirty) return false;
    this.dirty = false;
    const all = this.lines();
    const first = all.length - this.rows;
    const frag = doc.createDocumentFragment();
    all.forEach((row, i) => {
      // A row of the scrollback never changes: it is drawn once.
      if (i < first && this.drawn.has(row)) { frag.appendChild(this.drawn.get(row)); return; }
      const div = doc.createElement('div');
      div.className = 'vt-row';
      const cy = this.cursorVisible && i - first === this.y ? this.x : -1;
      let run = '', attr = null, cursor = false;
      const flush = () => {
        if (run === '') return;
        div.appendChild(cell(doc, run, attr, cursor));
        run = '';
      };
      row.forEach(([c, a], x) => {
        const isCursor = x === cy;
        if (attr === null || !sameAttr(a, attr) || isCursor || cursor) { flush(); attr = a; cursor = isCursor; }
        run += c;
      });
      flush();
      if (i < first) this.drawn.set(row, div);
      frag.appendChild(div);
    });
    el.replaceChildren(frag);
    return true;
  }
}

function cell(doc, text, a, cursor) {
  const span = doc.createElement('span');
  span.textContent = text;
  let fg = a.fg, bg = a.bg;
  // Inverse (and the cursor) swap the colours; a default colour swaps to
  // the other default.
  if (a.inverse !== cursor) [fg, bg] = [bg === -1 ? 'inv' : bg, fg === -1 ? 'inv' : fg];
  const cls = [];
  const paint = (v, kind) => {
    if (v === -1) return;
    if (v === 'inv') { cls.push(`vt-${kind}-inv`); return; }
    if (typeof v === 'number' && v < 16) { cls.push(`vt-${kind}${v}`); return; }
    span.style[kind === 'f' ? 'color' : 'backgroundColor'] = typeof v === 'number' ? xterm256(v) : v;
  };
  paint(fg, 'f'); paint(bg, 'b');
  if (a.bold) cls.push('vt-bold');
  if (a.dim) cls.push('vt-dim');
  if (a.italic) cls.push('vt-italic');
  if (a.underline) cls.push('vt-underline');
  if (cursor) cls.push('vt-cursor');
  if (cls.length) span.className = cls.join(' ');
  return span;
}

// xterm256 is the colour of an xterm 256-colour index from 16 up.
export function xterm256(n) {
  if (n >= 232) { const v = 8 + (n - 232) * 10; return `rgb(${v}, ${v}, ${v})`; }
  const i = n - 16;
  const lv = (k) => (k === 0 ? 0 : 55 + k * 40);
  return `rgb(${lv(Math.floor(i / 36))}, ${lv(Math.floor(i / 6) % 6)}, ${lv(i % 6)})`;
}
