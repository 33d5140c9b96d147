import { h, replace, table, note, field, select } from '../dom.js';
import { get, post, enc, session } from '../api.js';

export async function tenantsView(root, { refresh }) {
  if (!session.admin) { replace(root, h('h1', {}, 'Tenants'), note('Tenants and quotas need an admin key.', 'warn')); return; }
  const list = await get('/v1/tenants');
  const msg = h('div', { 'aria-live': 'polite' });
  const fail = (e) => replace(msg, note(`${e.message}${e.code ? ` (${e.code})` : ''}`, 'error'));
  const q = (v) => (v ? String(v) : '∞');
  // A volume quota of 0 leaves the service's per-tenant limit alone.
  const qv = (v) => (v ? String(v) : 'service');
  const rows = (list.items || []).map((t) => {
    const u = t.usage || {};
    return h('tr', { dataset: { name: t.name } },
      h('td', {}, t.name), h('td', {}, t.admin ? 'yes' : ''), h('td', { class: 'num' }, String(t.weight)), h('td', {}, t.min_risk_level || ''),
      h('td', { class: 'num' }, `${u.sandboxes ?? '–'} / ${q(t.quotas.max_sandboxes)}`), h('td', { class: 'num' }, `${u.cpu ?? '–'} / ${q(t.quotas.max_cpu)}`),
      h('td', { class: 'num' }, `${u.memory_mb ?? '–'} / ${q(t.quotas.max_memory_mb)}`), h('td', { class: 'num' }, `${u.leases ?? '–'} / ${q(t.quotas.max_leases)}`),
      h('td', { class: 'num', dataset: { quota: 'volumes' } }, `${u.volumes ?? '–'} / ${qv(t.quotas.max_volumes)}`),
      h('td', { class: 'num', dataset: { quota: 'volume_mb' } }, `${u.volume_mb ?? '–'} / ${qv(t.quotas.max_volume_mb)}`),
      h('td', {}, t.source),
      h('td', {}, h('button', { type: 'button', class: 'small', 'aria-label': `New key for ${t.name}`, onclick: async () => {
        try {
          const k = await post(`/v1/tenants/${enc(t.name)}/keys`, {});
          replace(msg, h('div', { class: 'note', role: 'status' }, `New key of ${t.name} (shown this once): `, h('code', { class: 'secret' }, k.key)));
        } catch (e) { fail(e); }
      } }, 'New key')));
  });
  const form = h('form', { class: 'card inline', 'aria-label': 'Create a tenant' },
    field('Name', h('input', { name: 'name', required: true, pattern: '[a-z0-9][a-z0-9-]{0,62}' })),
    field('Max sandboxes', h('input', { name: 'max_sandboxes', type: 'number', min: '0', value: '0' })),
    field('Max leases', h('input', { name: 'max_leases', type: 'number', min: '0', value: '0' })),
    field('Max volumes', h('input', { name: 'max_volumes', type: 'number', min: '0', value: '0' })),
    field('Max volume MiB', h('input', { name: 'max_volume_mb', type: 'number', min: '0', value: '0' })),
    field('Min risk level', select('min_risk_level', [['', 'none'], 'trusted', 'low', 'medium', 'high', 'untrusted'], '')),
    h('button', { type: 'submit' }, 'Create tenant'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const d = Object.fromEntries(new FormData(form));
    const body = { name: d.name, quotas: { max_sandboxes: Number(d.max_sandboxes), max_cpu: 0, max_memory_mb: 0, max_leases: Number(d.max_leases),
      max_volumes: Number(d.max_volumes), max_volume_mb: Number(d.max_volume_mb) } };
    if (d.min_risk_level) body.min_risk_level = d.min_risk_level;
    try { await post('/v1/tenants', body); refresh(); } catch (e) { fail(e); }
  });
  replace(root, h('h1', {}, 'Tenants and quotas'), msg,
    table('Tenants', ['Tenant', 'Admin', 'Weight', 'Min risk', 'Sandboxes', 'CPU', 'Memory MiB', 'Leases', 'Volumes', 'Volume MiB', 'Source', ''], rows), form,
    h('p', { class: 'muted' }, 'Usage / quota; ∞ is no limit. A volume quota of "service" is the service\'s per-tenant volume limit alone; a tenant\'s own volume quota can narrow it, never widen it.'));
}
