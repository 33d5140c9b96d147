import { h, replace, table, note, fmtTime, fmtBytes, field, saveBlob } from '../dom.js';
import { get, post, request, enc } from '../api.js';

// Files bigger than this are not opened in the viewer; a download is offered.
export const VIEW_LIMIT = 1 << 20;
const IMAGE = /\.(png|jpe?g|gif|webp|svg|bmp|ico)$/i;

function parent(p) {
  const i = p.replace(/\/+$/, '').lastIndexOf('/');
  return i <= 0 ? '/' : p.slice(0, i);
}

async function download(base, path) {
  const blob = await request('GET', `${base}/files`, { query: { path }, as: 'blob' });
  saveBlob(blob, path.split('/').pop() || 'download');
}

export async function filesView(root, { params: [id], query, refresh, go }) {
  const base = `/v1/sandboxes/${enc(id)}`;
  const path = query.get('path') || '/workspace';
  const [sb, list] = await Promise.all([get(base), get(`${base}/files/list`, { path, depth: 1 })]);
  const msg = h('div', { 'aria-live': 'polite', id: 'files-msg' });
  const fail = (e) => replace(msg, note(`${e.message}${e.code ? ` (${e.code})` : ''}`, 'error'));
  const link = (p, q = {}) => `#/sandboxes/${enc(sb.id)}/files${q.view ? '/view' : ''}?path=${enc(p)}`;

  const rows = (list.entries || []).map((e) => h('tr', { dataset: { name: e.name } },
    h('td', {}, e.type === 'dir' ? h('a', { href: link(e.path) }, e.name + '/')
      : e.type === 'file' ? h('a', { href: link(e.path, { view: true }) }, e.name) : `${e.name}${e.link_target ? ' → ' + e.link_target : ''}`),
    h('td', {}, e.type), h('td', { class: 'num' }, e.type === 'file' ? fmtBytes(e.size) : ''), h('td', {}, e.mode), h('td', {}, fmtTime(e.mtime)),
    h('td', { class: 'actions' },
      e.type === 'file' ? h('button', { type: 'button', class: 'small', 'aria-label': `Download ${e.name}`, onclick: () => download(base, e.path).catch(fail) }, 'Download') : null,
      h('button', { type: 'button', class: 'small danger', 'aria-label': `Delete ${e.name}`, onclick: async () => {
        if (!confirm(`Delete ${e.path}${e.type === 'dir' ? ' and everything in it' : ''}?`)) return;
        try { await post(`${base}/files/delete`, { path: e.path, recursive: e.type === 'dir' }); refresh(); } catch (err) { fail(err); }
      } }, 'Delete'))));

  const input = h('input', { type: 'file', name: 'file', id: 'upload-file', multiple: true, required: true });
  const up = h('form', { class: 'inline', id: 'upload', 'aria-label': 'Upload files' }, field('Upload to this directory', input), h('button', { type: 'submit' }, 'Upload'));
  up.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      for (const f of input.files) {
        replace(msg, note(`Uploading ${f.name} (${fmtBytes(f.size)})…`));
        await request('PUT', `${base}/files`, { query: { path: `${path.replace(/\/$/, '')}/${f.name}` }, raw: f });
      }
      refresh();
    } catch (e) { fail(e); }
  });
  const mk = h('form', { class: 'inline', 'aria-label': 'New directory' }, field('New directory', h('input', { name: 'name', required: true })), h('button', { type: 'submit' }, 'Create'));
  mk.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try { await post(`${base}/files/mkdir`, { path: `${path.replace(/\/$/, '')}/${new FormData(mk).get('name')}` }); refresh(); } catch (e) { fail(e); }
  });

  const found = h('div', { id: 'search-results', 'aria-live': 'polite' });
  const search = h('form', { class: 'inline', id: 'search', role: 'search', 'aria-label': 'Search below this directory' },
    field('File names (glob)', h('input', { name: 'glob', placeholder: '*.py' })),
    field('Containing text', h('input', { name: 'content', placeholder: 'TODO' })),
    h('button', { type: 'submit' }, 'Search'));
  search.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const d = Object.fromEntries(new FormData(search));
    const body = { path, max_results: 200 };
    if (d.glob) body.glob = d.glob;
    if (d.content) body.content = d.content;
    replace(found, note('Searching…'));
    try {
      const r = await post(`${base}/files/search`, body);
      replace(found, table('Search results', ['Path', 'Line', 'Text'], (r.matches || []).map((m) => h('tr', {},
        h('td', {}, h('a', { href: link(m.path, { view: true }) }, m.path)), h('td', { class: 'num' }, m.line ? String(m.line) : ''), h('td', {}, m.text ? h('code', {}, m.text) : ''))),
      'Nothing found.'), r.truncated || r.timed_out ? note(`Results were cut off (${r.timed_out ? 'time limit' : 'result limit'}).`, 'warn') : null);
    } catch (e) { fail(e); }
  });

  replace(root,
    h('div', { class: 'title-row' }, h('h1', {}, `Files of ${sb.id}`), h('a', { class: 'button', href: `#/sandboxes/${enc(sb.id)}` }, 'Sandbox')),
    h('nav', { 'aria-label': 'Path', class: 'crumbs' }, h('code', { id: 'cwd' }, path), path !== '/' ? [' ', h('a', { href: link(parent(path)) }, 'up')] : null),
    msg,
    table(`Files in ${path}`, ['Name', 'Type', 'Size', 'Mode', 'Modified', ''], rows, 'This directory is empty.'),
    list.truncated ? note('The listing was cut off.', 'warn') : null,
    h('div', { class: 'card grid' }, up, mk),
    h('section', { class: 'card', 'aria-label': 'Search' }, search, found));
  void go;
}

export async function fileView(root, { params: [id], query }) {
  const base = `/v1/sandboxes/${enc(id)}`;
  const path = query.get('path') || '';
  const st = await get(`${base}/files/stat`, { path });
  const body = h('div', { id: 'viewer' });
  const dl = h('button', { type: 'button', id: 'download-file', onclick: () => download(base, st.path).catch((e) => replace(body, note(e.message, 'error'))) }, 'Download');
  replace(root,
    h('div', { class: 'title-row' }, h('h1', {}, st.name),
      h('div', { class: 'actions' }, dl, h('a', { class: 'button', href: `#/sandboxes/${enc(id)}/files?path=${enc(parent(st.path))}` }, 'Back to the folder'))),
    h('p', { class: 'muted' }, `${st.path} · ${fmtBytes(st.size)} · ${st.mode} · modified ${fmtTime(st.mtime)}`), body);
  if (st.type !== 'file') { replace(body, note('Only regular files can be viewed.', 'warn')); return; }
  if (st.size > VIEW_LIMIT) {
    replace(body, note(`This file is ${fmtBytes(st.size)}: too large to view here (the limit is ${fmtBytes(VIEW_LIMIT)}). Download it instead.`, 'warn'));
    return;
  }
  const blob = await request('GET', `${base}/files`, { query: { path: st.path }, as: 'blob' });
  if (IMAGE.test(st.name)) {
    const url = URL.createObjectURL(blob.type.startsWith('image/') ? blob : new Blob([blob], { type: st.name.endsWith('.svg') ? 'image/svg+xml' : 'image/png' }));
    replace(body, h('img', { src: url, alt: st.name, class: 'preview' }));
    return () => URL.revokeObjectURL(url);
  }
  const bytes = new Uint8Array(await blob.arrayBuffer());
  if (bytes.includes(0)) { replace(body, note('This looks like a binary file; download it to open it.', 'warn')); return; }
  replace(body, h('pre', { class: 'log', tabindex: '0', 'aria-label': `Contents of ${st.name}` }, new TextDecoder().decode(bytes)));
}
