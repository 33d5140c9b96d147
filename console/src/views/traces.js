// traces.js: the trace player of a sandbox (#/traces/ID) and the way to it
// (#/traces). The events come a page at a time from the JSON form of GET
// /v1/sandboxes/{id}/trace; a screenshot or video segment is fetched with
// the key (an <img> cannot send it) and shown from a blob: URL.
import { h, replace, table, note, fmtTime, saveBlob, newestFirst } from '../dom.js';
import { get, request, enc } from '../api.js';
import { renderPlayer } from '../player/player.js';

export async function tracesView(root, { go }) {
  const list = await get('/v1/sandboxes');
  const rows = newestFirst(list.items || []).map((sb) => h('tr', {},
    h('td', {}, h('a', { href: `#/traces/${enc(sb.id)}` }, sb.id)), h('td', {}, sb.profile), h('td', {}, sb.state), h('td', {}, fmtTime(sb.created_at))));
  const form = h('form', { class: 'card inline', 'aria-label': 'Open a trace' },
    h('label', {}, 'Sandbox id ', h('input', { name: 'id', required: true, placeholder: 'sbx_…' })), h('button', { type: 'submit' }, 'Open'));
  form.addEventListener('submit', (ev) => { ev.preventDefault(); go(`/traces/${enc(new FormData(form).get('id').trim())}`); });
  replace(root, h('h1', {}, 'Traces'),
    h('p', {}, 'Every sandbox keeps a trace of what happened in it, also after it is gone (for the log retention). Open one below, or by its id.'),
    form, table('Sandboxes, newest first', ['Sandbox', 'Profile', 'State', 'Created'], rows, 'No sandboxes now.'));
}

export async function traceView(root, { params: [id] }) {
  const events = [];
  for (let after = 0; ;) {
    const page = await get(`/v1/sandboxes/${enc(id)}/trace`, { format: 'json', after, limit: 1000 });
    if (!page.events || !page.events.length) break;
    events.push(...page.events);
    after = page.next;
  }
  const urls = new Map();
  const artifactURL = async (aid) => {
    if (!urls.has(aid)) urls.set(aid, request('GET', `/v1/artifacts/${enc(aid)}`, { as: 'blob' }).then((b) => URL.createObjectURL(b)));
    return urls.get(aid);
  };
  const msg = h('div', { 'aria-live': 'polite' });
  const exportBtn = h('button', { type: 'button', id: 'trace-export', onclick: async () => {
    try {
      saveBlob(await request('GET', `/v1/sandboxes/${enc(id)}/trace/export`, { as: 'blob' }), `trace-${id}.tar.gz`);
    } catch (e) { replace(msg, note(e.message, 'error')); }
  } }, 'Export (tar.gz with an offline player)');
  const player = h('section', { id: 'player', 'aria-label': 'Trace player' });
  replace(root, h('p', {}, h('a', { href: `#/sandboxes/${enc(id)}` }, `Sandbox ${id}`), ' · ', exportBtn), msg, player);
  if (!events.length) {
    replace(player, h('h1', {}, `Trace of ${id}`), note('Nothing recorded yet.'));
    return;
  }
  renderPlayer(player, events, artifactURL, `Trace of ${id}`);
}
