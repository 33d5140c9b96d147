import { h, replace, table, note, fmtTime, field, badge } from '../dom.js';
import { get, session } from '../api.js';

// The audit log, a page at a time (oldest first, as the API pages it).
// "Previous" walks back through the cursors seen; "Follow" polls for new
// records after the last page and appends them.
export async function auditView(root, { query, go }) {
  const f = {};
  for (const k of ['action', 'target', 'result', 'tenant', 'since', 'limit']) f[k] = query.get(k) || '';
  const cursor = query.get('cursor') || '';
  const back = (query.get('back') || '').split(',').filter(Boolean);
  const page = await get('/v1/audit', { ...f, limit: f.limit || 50, cursor });
  // Actions break after a slash and codes after an underscore, ids only
  // when they are longer than ids are, so the table fits the page (1280 px
  // and less) instead of scrolling sideways.
  const row = (r) => h('tr', { dataset: { seq: String(r.seq) } },
    h('td', { class: 'num' }, String(r.seq)), h('td', {}, fmtTime(r.time)), h('td', { class: 'wrap' }, r.tenant || '–'), h('td', { class: 'wrap id' }, r.actor),
    h('td', { class: 'wrap' }, h('code', {}, breakAfter(r.action, '/'))), h('td', { class: 'wrap id' }, r.target || ''), h('td', {}, badge(String(r.status), r.status >= 400 ? 'failed' : 'ready')),
    h('td', { class: 'wrap' }, breakAfter(r.code || '', '_')), h('td', { class: 'wrap id' }, r.request_id || ''));
  const body = h('tbody', { id: 'audit-rows' }, (page.items || []).map(row));
  const filters = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter the audit log' },
    field('Action', h('input', { name: 'action', value: f.action, placeholder: 'POST /v1/sandboxes or DELETE' })),
    field('Target', h('input', { name: 'target', value: f.target, placeholder: 'an id' })),
    field('Result', h('input', { name: 'result', value: f.result, placeholder: '404, 4xx or a code' })),
    session.admin ? field('Tenant', h('input', { name: 'tenant', value: f.tenant })) : null,
    field('Since', h('input', { name: 'since', value: f.since, placeholder: 'RFC 3339 time' })),
    field('Page size', h('input', { name: 'limit', type: 'number', min: '1', max: '1000', value: f.limit || '50' })),
    h('button', { type: 'submit' }, 'Filter'));
  filters.addEventListener('submit', (ev) => { ev.preventDefault(); go('/audit', Object.fromEntries(new FormData(filters))); });

  const status = h('p', { role: 'status', id: 'audit-status' }, `${(page.items || []).length} records${page.has_more ? ', more follow' : ''}`);
  const prev = back.length ? h('a', { class: 'button', id: 'audit-prev', href: '#/audit?' + new URLSearchParams({ ...clean(f), cursor: back[back.length - 1] === '-' ? '' : back[back.length - 1], back: back.slice(0, -1).join(',') }) }, 'Previous page') : null;
  const next = page.has_more ? h('a', { class: 'button', id: 'audit-next', href: '#/audit?' + new URLSearchParams({ ...clean(f), cursor: page.next_cursor, back: [...back, cursor || '-'].join(',') }) }, 'Next page') : null;

  let timer = null;
  let last = page.next_cursor;
  const followBox = h('input', { type: 'checkbox', id: 'follow' });
  followBox.addEventListener('change', () => {
    clearInterval(timer);
    if (!followBox.checked) return;
    const poll = async () => {
      try {
        for (;;) {
          const p = await get('/v1/audit', { ...f, limit: 200, cursor: last });
          for (const r of p.items || []) body.append(row(r));
          if ((p.items || []).length) replace(status, `${body.children.length} records, following`);
          last = p.next_cursor;
          if (!p.has_more) break;
        }
      } catch (e) { replace(status, note(e.message, 'error')); }
    };
    poll();
    timer = setInterval(poll, 2000);
  });

  replace(root, h('h1', {}, 'Audit log'), filters, status,
    h('div', { class: 'table-wrap' }, h('table', { class: 'audit', id: 'audit-table' }, h('caption', { class: 'sr-only' }, 'Audit records'),
      h('thead', {}, h('tr', {}, ['Seq', 'Time', 'Tenant', 'Actor', 'Action', 'Target', 'Status', 'Code', 'Request'].map((x) => h('th', { scope: 'col' }, x)))), body)),
    h('div', { class: 'pager' }, prev, next, h('label', { class: 'check' }, followBox, ' Follow new records')));
  return () => clearInterval(timer);
}

function clean(o) { return Object.fromEntries(Object.entries(o).filter(([, v]) => v)); }

// breakAfter is text with a line-break opportunity (<wbr>) after every sep.
function breakAfter(text, sep) {
  return text.split(sep).flatMap((part, i, all) => (i < all.length - 1 ? [part + sep, h('wbr', {})] : [part]));
}
