import { h, replace, table, field, select, badge, note, fmtTime, lifetime, newestFirst } from '../dom.js';
import { get, post, del, enc, session } from '../api.js';

const STATES = ['', 'created', 'starting', 'ready', 'leased', 'busy', 'idle', 'paused', 'hibernated', 'draining', 'destroyed', 'failed'];
const RISKS = ['', 'trusted', 'low', 'medium', 'high', 'untrusted'];
// Every state but destroyed: the list leaves destroyed sandboxes out
// unless asked (they would soon outnumber the live ones).
const NOT_DESTROYED = STATES.filter((s) => s && s !== 'destroyed');

export async function sandboxesView(root, { query, go, refresh }) {
  const f = {
    state: query.get('state') || '', profile: query.get('profile') || '',
    runtime: query.get('runtime') || '', metadata: query.get('metadata') || '',
    tenant: session.admin ? (query.get('tenant') || '') : '',
    destroyed: query.get('destroyed') === '1',
  };
  const states = f.state || (f.destroyed ? '' : NOT_DESTROYED.join(','));
  const [list, profiles] = await Promise.all([
    get('/v1/sandboxes', { state: states, profile: f.profile, tenant: f.tenant, metadata: f.metadata ? f.metadata.split(',').map((s) => s.trim()) : [] }),
    get('/v1/profiles').catch(() => ({ items: [] })),
  ]);
  const profs = profiles.items || profiles || [];
  // Newest first: the sandbox just made is at the top.
  const items = newestFirst((list.items || []).filter((s) => !f.runtime || s.runtime === f.runtime));

  const filters = h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter sandboxes' },
    field('State', select('state', STATES, f.state)),
    field('Profile', select('profile', ['', ...profs.map((p) => p.name)], f.profile)),
    field('Runtime', select('runtime', ['', 'runc', 'runsc'], f.runtime)),
    field('Metadata', h('input', { name: 'metadata', value: f.metadata, placeholder: 'key=value, key2=value2' })),
    // An admin key lists any tenant's sandboxes (* for all).
    session.admin ? field('Tenant', h('input', { name: 'tenant', value: f.tenant, placeholder: 'yours; * for every tenant' })) : null,
    h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'destroyed', value: '1', id: 'show-destroyed', checked: f.destroyed,
      onchange: () => filters.requestSubmit() }), ' Show destroyed'),
    h('button', { type: 'submit' }, 'Filter'));
  filters.addEventListener('submit', (ev) => {
    ev.preventDefault();
    go('/sandboxes', Object.fromEntries(new FormData(filters)));
  });

  const msg = h('div', { 'aria-live': 'polite' });
  const rows = items.map((s) => h('tr', { dataset: { id: s.id } },
    // Another tenant's sandbox (an admin's listing) opens acting for its
    // tenant (X-Genesis-Tenant): the API then answers as to its own key.
    h('td', {}, h('a', { href: `#/sandboxes/${enc(s.id)}${s.tenant && s.tenant !== session.owner ? `?as=${enc(s.tenant)}` : ''}` }, s.id)),
    session.admin ? h('td', {}, s.tenant || '') : null,
    h('td', {}, badge(s.state)),
    h('td', {}, s.profile), h('td', {}, s.runtime), h('td', {}, s.risk_level),
    h('td', {}, Object.entries(s.metadata || {}).map(([k, v]) => `${k}=${v}`).join(', ')),
    h('td', {}, fmtTime(s.created_at)),
    h('td', { class: 'lifetime' }, lifetime(s).text),
    h('td', {}, s.state === 'destroyed' ? null : h('button', {
      type: 'button', class: 'danger small', 'aria-label': `Delete ${s.id}`,
      onclick: async () => {
        if (!confirm(`Delete sandbox ${s.id}?`)) return;
        const as = s.tenant && s.tenant !== session.owner ? { headers: { 'X-Genesis-Tenant': s.tenant } } : {};
        try { await del(`/v1/sandboxes/${enc(s.id)}`, as); refresh(); } catch (e) { replace(msg, note(e.message, 'error')); }
      },
    }, 'Delete'))));

  replace(root,
    h('div', { class: 'title-row' }, h('h1', {}, 'Sandboxes'),
      h('span', { class: 'muted', id: 'count' }, `${items.length} listed, newest first${f.state || f.destroyed ? '' : ' (destroyed ones hidden)'}`)),
    filters, msg,
    table('Sandboxes', ['ID', ...(session.admin ? ['Tenant'] : []), 'State', 'Profile', 'Runtime', 'Risk', 'Metadata', 'Created', 'Expires or ended', ''], rows, 'No sandboxes match.'),
    createForm(profs, go));
  root.dataset.listed = String(items.length);
  performance.mark('sandboxes-listed');
}

function createForm(profs, go) {
  const usable = profs.filter((p) => p.image_status === 'present');
  const network = select('network', ['none', 'allowlist'], 'none');
  const allow = h('input', { name: 'allow', placeholder: 'example.org, *.example.com', disabled: true });
  network.addEventListener('change', () => { allow.disabled = network.value !== 'allowlist'; });
  const msg = h('div', { 'aria-live': 'polite' });
  const form = h('form', { class: 'card', 'aria-labelledby': 'create-title', id: 'create' },
    h('h2', { id: 'create-title' }, 'Create a sandbox'),
    h('div', { class: 'grid' },
      field('Profile', select('profile', profs.map((p) => [p.name, p.image_status === 'present' ? p.name : `${p.name} (image not built)`]), usable[0] && usable[0].name)),
      field('Runtime', select('runtime', [['', 'by risk level'], 'runc', 'runsc'], '')),
      field('Risk level', select('risk_level', RISKS.map((r) => [r, r || 'service default']), '')),
      field('Network', network),
      field('Allowed hosts', allow, 'allowlist only: host names, exact or *.suffix'),
      field('Metadata', h('input', { name: 'metadata', placeholder: 'key=value, key2=value2' })),
      field('TTL (seconds)', h('input', { name: 'ttl_seconds', type: 'number', min: '0', placeholder: 'service default' }))),
    h('button', { type: 'submit', id: 'create-submit' }, 'Create'), msg);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const d = Object.fromEntries(new FormData(form));
    const body = { profile: d.profile };
    if (d.runtime) body.runtime = d.runtime;
    if (d.risk_level) body.risk_level = d.risk_level;
    if (d.ttl_seconds) body.ttl_seconds = Number(d.ttl_seconds);
    if (d.metadata) body.metadata = Object.fromEntries(d.metadata.split(',').map((p) => p.trim()).filter(Boolean).map((p) => { const i = p.indexOf('='); return [p.slice(0, i), p.slice(i + 1)]; }));
    if (network.value === 'allowlist') {
      body.network = { mode: 'allowlist', allow: (allow.value || '').split(',').map((x) => x.trim()).filter(Boolean).map((host) => ({ host })) };
    }
    replace(msg, note('Creating… (a cold start takes a second or two)'));
    try {
      const sb = await post('/v1/sandboxes', body, { headers: { 'Idempotency-Key': crypto.randomUUID() } });
      go(`/sandboxes/${sb.id}`);
    } catch (e) {
      replace(msg, note(`${e.message}${e.code ? ` (${e.code})` : ''}`, 'error'));
    }
  });
  return form;
}
