// desktop-control.js: who holds a desktop sandbox's control, the agent's
// requests for a person, and the Live view / Take over / Release buttons:
// the desktops view (#/desktop) shows them per row, a desktop sandbox's
// own page (#/sandboxes/ID) in its Desktop section. The live view is the
// service's viewer page, opened in a new tab with a 10-minute link (the
// key never reaches it).
import { h, replace, note, badge } from '../dom.js';
import { get, post, del, enc, session } from '../api.js';

// openView opens the live-view page of sandbox id in a new tab with a link
// of role (observer or controller) for the person who, and answers its URL.
export async function openView(id, role, who) {
  const link = await post(`/v1/sandboxes/${enc(id)}/display/links`, { role, ttl_seconds: 600 });
  const url = `${link.viewer_url}?who=${enc(who)}`;
  window.open(url, '_blank', 'noopener');
  return url;
}

// getControl reads who holds a desktop's control (null if it cannot be
// read).
export function getControl(id) {
  return get(`/v1/sandboxes/${enc(id)}/control`).catch(() => null);
}

// holderText is who holds control, as text (a holder is whatever the
// agent or a person named: it is never markup).
export function holderText(c) {
  return c && c.holder ? badge(c.holder, c.holder.startsWith('human:') ? 'warn' : '') : 'the agent may act';
}

// requestsText lists the agent's open requests for a person.
export function requestsText(c) {
  return ((c && c.requests) || []).map((r) => h('div', { class: 'request' }, `asks for a person: ${r.reason}`));
}

// controlButtons are the Live view, Take over and Release buttons of
// desktop sandbox id; msg shows what happened, done runs after a change.
export function controlButtons(id, msg, done) {
  const who = session.tenant || 'console';
  const act = (f) => async () => { try { await f(); done(); } catch (e) { replace(msg, note(`${e.message}${e.code ? ` (${e.code})` : ''}`, 'error')); } };
  return [
    h('button', { type: 'button', class: 'small', 'data-action': 'observe', title: 'Watch the desktop in a new tab; your input does not reach it',
      onclick: act(async () => { replace(msg, note(`Observing in a new tab: ${await openView(id, 'observer', who)}`)); }) }, 'Live view'),
    h('button', { type: 'button', class: 'small', 'data-action': 'takeover', title: 'Hold control (the agent waits) and open the live view in a new tab',
      onclick: act(async () => {
        await post(`/v1/sandboxes/${enc(id)}/control`, { holder: `human:${who}`, reason: 'taken over in the console' });
        replace(msg, note(`You hold control; the live view opened in a new tab: ${await openView(id, 'controller', who)}`));
      }) }, 'Take over'),
    h('button', { type: 'button', class: 'small', 'data-action': 'release', title: 'Give control back to the agent',
      onclick: act(() => del(`/v1/sandboxes/${enc(id)}/control`)) }, 'Release'),
  ];
}
