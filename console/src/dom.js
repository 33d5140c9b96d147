// dom.js: building elements without HTML strings (so nothing the API
// answers is ever parsed as markup) and small formatting helpers.

// h builds an element: attrs may hold class, on<event> handlers, dataset
// (an object) and any other attribute; children are nodes, strings or
// arrays of them (null and false are skipped).
export function h(tag, attrs, ...children) {
  const el = tag.startsWith('svg:')
    ? document.createElementNS('http://www.w3.org/2000/svg', tag.slice(4))
    : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'value' && 'value' in el) el.value = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

// replace empties el and puts children in it.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

export function fmtTime(s) {
  if (!s) return '–';
  const d = new Date(s);
  return isNaN(d) ? s : d.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' });
}

export function fmtBytes(n) {
  if (n === undefined || n === null) return '–';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + ' ' + u[i];
}

export function fmtRelative(s) {
  if (!s) return '–';
  const ms = new Date(s).getTime() - Date.now();
  const a = Math.abs(ms) / 1000;
  const t = a < 90 ? `${Math.round(a)} s` : a < 5400 ? `${Math.round(a / 60)} min` : `${Math.round(a / 3600)} h`;
  return ms >= 0 ? `in ${t}` : `${t} ago`;
}

// table builds an accessible table from column headings and rows of cells.
export function table(caption, heads, rows, empty = 'Nothing here yet.') {
  if (!rows.length) return h('p', { class: 'muted', role: 'status' }, empty);
  return h('div', { class: 'table-wrap' },
    h('table', {},
      h('caption', { class: 'sr-only' }, caption),
      h('thead', {}, h('tr', {}, heads.map((x) => h('th', { scope: 'col' }, x)))),
      h('tbody', {}, rows)));
}

// field is one labelled form control.
export function field(label, control, hint) {
  const id = control.id || (control.id = 'f-' + Math.random().toString(36).slice(2, 9));
  return h('div', { class: 'field' }, h('label', { for: id }, label), control, hint ? h('small', { class: 'muted' }, hint) : null);
}

export function select(name, options, value) {
  return h('select', { name }, options.map((o) => {
    const [v, text] = Array.isArray(o) ? o : [o, o || 'any'];
    return h('option', { value: v, selected: v === value }, text);
  }));
}

export function badge(text, kind) {
  return h('span', { class: `badge ${kind || String(text).replace(/[^a-z_-]/gi, '')}` }, text);
}

// status renders a message in a live region.
export function note(text, kind = 'info') {
  return h('p', { class: `note ${kind}`, role: kind === 'error' ? 'alert' : 'status' }, text);
}

// download saves a Blob under a file name.
export function saveBlob(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = h('a', { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

// FINAL_STATES are the states of a sandbox that has ended.
export const FINAL_STATES = ['destroyed', 'failed'];

// lifetime says when a sandbox expires, or, once it has ended, when that
// was (its last update): a destroyed sandbox does not expire "in 4 min".
export function lifetime(sb) {
  if (FINAL_STATES.includes(sb.state)) return { label: 'Ended', at: sb.updated_at, text: `ended ${fmtRelative(sb.updated_at)}` };
  return { label: 'Expires', at: sb.expires_at, text: sb.expires_at ? fmtRelative(sb.expires_at) : 'never' };
}

// newestFirst sorts a list of records by created_at, newest first.
export function newestFirst(items, key = 'created_at') {
  return [...items].sort((a, b) => String(b[key] || '').localeCompare(String(a[key] || '')));
}

const EXIT_REASONS = {
  timeout: (j) => `timed out${j.timeout_ms ? ` after ${fmtDuration(j.timeout_ms)}` : ''}`,
  oom: () => 'killed: out of memory',
  canceled: () => 'canceled',
  signal: (j) => `killed by ${j.signal || 'a signal'}`,
  lost: () => 'lost (the service lost track of it)',
};

// exitSummary says how a job ended in words: the exit code of a process
// that exited, else why it was stopped (timeout, oom, canceled, signal,
// lost), so a timed-out job does not read as a plain failure. Running
// jobs have none ('').
export function exitSummary(j) {
  const why = EXIT_REASONS[j.exit_reason];
  if (why) return why(j) + (j.exit_code !== undefined && j.exit_code !== null ? ` (exit ${j.exit_code})` : '');
  if (j.exit_code !== undefined && j.exit_code !== null) return `exit ${j.exit_code}`;
  return '';
}

// exitBadge is a job's state, with the reason it was stopped beside it
// when it did not simply exit.
export function exitBadge(j) {
  const reason = EXIT_REASONS[j.exit_reason] && j.exit_reason !== j.state ? j.exit_reason : '';
  return reason ? [badge(j.state), ' ', badge(reason === 'timeout' ? 'timed out' : reason, `reason ${reason}`)] : [badge(j.state)];
}

// jobWhat is what a job runs: its script, or its command.
export function jobWhat(j) {
  return j.script || (j.command || []).join(' ');
}

export function fmtDuration(ms) {
  if (ms < 1000) return `${ms} ms`;
  if (ms < 90000) return `${+(ms / 1000).toFixed(1)} s`;
  if (ms < 5400000) return `${Math.round(ms / 60000)} min`;
  return `${+(ms / 3600000).toFixed(1)} h`;
}
