// desktops.js: the desktop sandboxes (#/desktop) with who holds control,
// the agent's requests for a person, and live view / take over / release
// (desktop-control.js, shared with a desktop sandbox's own page).
import { h, replace, table } from '../dom.js';
import { get, enc } from '../api.js';
import { getControl, holderText, requestsText, controlButtons } from './desktop-control.js';

export async function desktopsView(root, { refresh }) {
  const [list, profiles] = await Promise.all([get('/v1/sandboxes', { state: 'ready,leased' }), get('/v1/profiles').catch(() => ({ items: [] }))]);
  const desktopProfiles = new Set((profiles.items || []).filter((p) => p.desktop).map((p) => p.name));
  const desktops = (list.items || []).filter((sb) => desktopProfiles.has(sb.profile));
  const controls = await Promise.all(desktops.map((sb) => getControl(sb.id)));
  const msg = h('div', { 'aria-live': 'polite', id: 'desktop-msg' });
  const rows = desktops.map((sb, i) => {
    const c = controls[i] || {};
    return h('tr', { dataset: { sandbox: sb.id } },
      h('td', {}, h('a', { href: `#/sandboxes/${enc(sb.id)}` }, sb.id)), h('td', {}, sb.profile), h('td', {}, sb.runtime),
      h('td', { class: 'holder' }, holderText(c)),
      h('td', {}, requestsText(c)),
      h('td', { class: 'actions' }, controlButtons(sb.id, msg, refresh),
        h('a', { class: 'button small', href: `#/traces/${enc(sb.id)}` }, 'Trace')));
  });
  replace(root, h('h1', {}, 'Desktops'), msg,
    h('p', {}, 'Desktop sandboxes that are ready or leased now. Taking over stops the agent at once (its input answers 409 control_held) until you release; the live view opens in a new tab with a link that expires in 10 minutes.'),
    table('Desktop sandboxes', ['Sandbox', 'Profile', 'Runtime', 'Control', 'Requests', ''], rows, 'No desktop sandbox is running.'));
}
