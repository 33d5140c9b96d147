// desktops.js: the desktop sandboxes (#/desktop) with who holds control,
// the agent's requests for a person, and observe / take over / release.
// The live view itself is the service's viewer page, opened in a new tab
// with a short-lived link (the key never reaches it).
import { h, replace, table, note, badge } from '../dom.js';
import { get, post, del, enc, session } from '../api.js';

async function openView(id, role, who) {
  const link = await post(`/v1/sandboxes/${enc(id)}/display/links`, { role, ttl_seconds: 600 });
  const url = `${link.viewer_url}?who=${enc(who)}`;
  window.open(url, '_blank', 'noopener');
  return url;
}

export async function desktopsView(root, { refresh }) {
  const [list, profiles] = await Promise.all([get('/v1/sandboxes', { state: 'ready,leased' }), get('/v1/profiles').catch(() => ({ items: [] }))]);
  const desktopProfiles = new Set((profiles.items || []).filter((p) => p.desktop).map((p) => p.name));
  const desktops = (list.items || []).filter((sb) => desktopProfiles.has(sb.profile));
  const controls = await Promise.all(desktops.map((sb) => get(`/v1/sandboxes/${enc(sb.id)}/control`).catch(() => null)));
  const msg = h('div', { 'aria-live': 'polite', id: 'desktop-msg' });
  const who = session.tenant || 'console';
  const act = (f) => async () => { try { await f(); refresh(); } catch (e) { replace(msg, note(`${e.message}${e.code ? ` (${e.code})` : ''}`, 'error')); } };
  const rows = desktops.map((sb, i) => {
    const c = controls[i] || {};
    return h('tr', { dataset: { sandbox: sb.id } },
      h('td', {}, h('a', { href: `#/sandboxes/${enc(sb.id)}` }, sb.id)), h('td', {}, sb.profile), h('td', {}, sb.runtime),
      h('td', { class: 'holder' }, c.holder ? badge(c.holder, c.holder.startsWith('human:') ? 'warn' : '') : 'the agent may act'),
      h('td', {}, (c.requests || []).map((r) => h('div', { class: 'request' }, `asks for a person: ${r.reason}`))),
      h('td', { class: 'actions' },
        h('button', { type: 'button', class: 'small', onclick: act(async () => { replace(msg, note(`Observing in a new tab: ${await openView(sb.id, 'observer', who)}`)); }) }, 'Observe'),
        h('button', { type: 'button', class: 'small', 'data-action': 'takeover', onclick: act(async () => {
          await post(`/v1/sandboxes/${enc(sb.id)}/control`, { holder: `human:${who}`, reason: 'taken over in the console' });
          replace(msg, note(`You hold control; the live view opened in a new tab: ${await openView(sb.id, 'controller', who)}`));
        }) }, 'Take over'),
        h('button', { type: 'button', class: 'small', 'data-action': 'release', onclick: act(() => del(`/v1/sandboxes/${enc(sb.id)}/control`)) }, 'Release'),
        h('a', { class: 'button small', href: `#/traces/${enc(sb.id)}` }, 'Trace')));
  });
  replace(root, h('h1', {}, 'Desktops'), msg,
    h('p', {}, 'Desktop sandboxes that are ready or leased now. Taking over stops the agent at once (its input answers 409 control_held) until you release; the live view opens in a new tab with a link that expires in 10 minutes.'),
    table('Desktop sandboxes', ['Sandbox', 'Profile', 'Runtime', 'Control', 'Requests', ''], rows, 'No desktop sandbox is running.'));
}
