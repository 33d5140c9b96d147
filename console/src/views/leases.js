import { h, replace, table, badge, note, fmtTime, fmtRelative, field, select, newestFirst } from '../dom.js';
import { get, post, del, enc } from '../api.js';
import { session } from '../api.js';

export async function leasesView(root, { refresh, go }) {
  const [list, profiles] = await Promise.all([get('/v1/leases'), get('/v1/profiles').catch(() => ({ items: [] }))]);
  const msg = h('div', { 'aria-live': 'polite' });
  const fail = (e) => replace(msg, note(`${e.message}${e.code ? ` (${e.code})` : ''}`, 'error'));
  const rows = newestFirst(list.items || []).map((l) => h('tr', { dataset: { id: l.lease_id } },
    h('td', {}, l.lease_id), h('td', {}, badge(l.state)), h('td', {}, h('a', { href: `#/sandboxes/${enc(l.sandbox_id)}` }, l.sandbox_id)),
    h('td', {}, l.profile), h('td', {}, l.runtime), h('td', {}, l.warm ? 'warm' : 'cold'), h('td', {}, l.holder || ''),
    h('td', {}, fmtTime(l.created_at)), h('td', {}, l.ended_at ? `ended ${fmtTime(l.ended_at)} (${l.end_reason || ''})` : fmtRelative(l.expires_at)),
    h('td', { class: 'actions' }, l.ended_at ? null : [
      h('button', { type: 'button', class: 'small', 'aria-label': `Renew ${l.lease_id}`, onclick: async () => { try { await post(`/v1/leases/${enc(l.lease_id)}/renew`, {}); refresh(); } catch (e) { fail(e); } } }, 'Renew'),
      h('button', { type: 'button', class: 'small danger', 'aria-label': `Release ${l.lease_id}`, onclick: async () => { try { await del(`/v1/leases/${enc(l.lease_id)}`); refresh(); } catch (e) { fail(e); } } }, 'Release')])));
  const profs = (profiles.items || []).filter((p) => p.image_status === 'present').map((p) => p.name);
  const form = h('form', { class: 'card inline', 'aria-label': 'Acquire a lease' },
    field('Profile', select('profile', profs, profs[0])), field('Runtime', select('runtime', [['', 'by risk level'], 'runc', 'runsc'], '')),
    field('TTL (seconds)', h('input', { name: 'ttl_seconds', type: 'number', min: '1', placeholder: 'profile default' })),
    field('Holder', h('input', { name: 'holder', placeholder: 'who holds it' })), h('button', { type: 'submit' }, 'Acquire'));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const d = Object.fromEntries(new FormData(form));
    const body = { profile: d.profile };
    if (d.runtime) body.runtime = d.runtime;
    if (d.ttl_seconds) body.ttl_seconds = Number(d.ttl_seconds);
    if (d.holder) body.holder = d.holder;
    try { await post('/v1/leases', body); refresh(); } catch (e) { fail(e); }
  });
  replace(root, h('h1', {}, 'Leases'), msg,
    table('Leases, newest first', ['Lease', 'State', 'Sandbox', 'Profile', 'Runtime', 'Pool', 'Holder', 'Acquired', 'Expires', ''], rows, 'No leases.'), form);
  void go;
}

export async function poolsView(root, { refresh }) {
  const list = await get('/v1/pools');
  const msg = h('div', { 'aria-live': 'polite' });
  const rows = (list.items || []).map((p) => {
    const asked = p.hits + p.misses;
    return h('tr', {},
      h('td', {}, p.name), h('td', {}, p.profile), h('td', {}, p.runtime),
      h('td', { class: 'num' }, String((p.counts || {}).idle || 0)), h('td', { class: 'num' }, `${p.min_idle} / ${p.max_total}`),
      h('td', { class: 'num' }, String(p.total)), h('td', { class: 'num' }, String(p.starting)),
      h('td', { class: 'num' }, asked ? `${Math.round((100 * p.hits) / asked)} % (${p.hits}/${asked})` : '–'),
      h('td', { class: 'num' }, String(p.made)), h('td', {}, p.draining ? badge('draining') : badge('serving', 'ready')),
      h('td', {}, p.last_error || ''),
      h('td', {}, session.admin && !p.draining ? h('button', { type: 'button', class: 'small danger', 'aria-label': `Drain ${p.name}`, onclick: async () => {
        if (!confirm(`Drain pool ${p.name}? Its idle sandboxes are destroyed and it stops serving.`)) return;
        try { await post(`/v1/pools/${enc(p.name)}/drain`, {}); refresh(); } catch (e) { replace(msg, note(e.message, 'error')); }
      } }, 'Drain') : null));
  });
  replace(root, h('h1', {}, 'Pools'), list.draining ? note('This service instance is draining.', 'warn') : null, msg,
    table('Warm pools', ['Pool', 'Profile', 'Runtime', 'Idle', 'Min idle / max', 'Total', 'Starting', 'Hit rate', 'Made', 'State', 'Last error', ''], rows, 'No warm pools (they may be switched off).'));
}
