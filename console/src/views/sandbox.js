import { h, replace, table, badge, note, fmtTime, fmtBytes, field, lifetime, exitBadge, exitSummary, jobWhat } from '../dom.js';
import { get, post, del, enc } from '../api.js';
import { getControl, holderText, requestsText, controlButtons } from './desktop-control.js';
import { stateSection, suspensionText, takeFlash } from './snapshots.js';

export async function sandboxView(root, { params: [id], go, refresh }) {
  const sb = await get(`/v1/sandboxes/${enc(id)}`);
  const base = `/v1/sandboxes/${enc(sb.id)}`;
  const live = !['destroyed', 'failed', 'draining'].includes(sb.state);
  const [jobList, profiles, snaps] = await Promise.all([
    get(`${base}/jobs`, { limit: 50 }).catch((e) => ({ items: [], error: e.message })),
    get('/v1/profiles').catch(() => ({ items: [] })),
    // null: this service keeps no snapshots (the route is not there).
    live ? get(`${base}/snapshots`).then((l) => l.items || [], (e) => (e.status === 404 ? null : [])) : null,
  ]);
  const desktop = live && (profiles.items || []).some((p) => p.name === sb.profile && p.desktop);
  const r = sb.resources || {};
  const msg = h('div', { 'aria-live': 'polite' });
  const ends = lifetime(sb);

  const facts = h('dl', { class: 'facts' },
    [['State', badge(sb.state)], ['Suspended', sb.suspension ? h('span', { id: 'suspended' }, suspensionText(sb)) : null], ['Profile', sb.profile], ['Runtime', sb.runtime], ['Risk level', sb.risk_level],
      ['Image', sb.image], ['CPU', r.cpu || '–'], ['Memory', r.memory_mb ? `${r.memory_mb} MiB` : '–'], ['Pids', r.pids || '–'],
      ['Disk', r.disk_mb ? `${r.disk_mb} MiB` : 'no quota'], ['Created', fmtTime(sb.created_at)], ['Updated', fmtTime(sb.updated_at)],
      [ends.label, h('span', { id: 'lifetime' }, ends.at ? `${fmtTime(ends.at)} (${ends.text})` : ends.text)], ['Failure', sb.failure_reason || null],
      ['Metadata', Object.entries(sb.metadata || {}).map(([k, v]) => `${k}=${v}`).join(', ') || '–'],
      ['Env keys', (sb.env_keys || []).join(', ') || '–']]
      .filter(([, v]) => v !== null).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));

  const run = h('form', { class: 'card', id: 'run', 'aria-labelledby': 'run-title' },
    h('h2', { id: 'run-title' }, 'Run a command'),
    field('Shell command', h('input', { name: 'script', id: 'script', required: true, placeholder: 'echo hello; ls /workspace', autocomplete: 'off' })),
    h('button', { type: 'submit', disabled: !live }, 'Run'));
  run.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const script = new FormData(run).get('script');
    try {
      const job = await post(`${base}/exec`, { script, background: true });
      go(`/jobs/${job.id}`);
    } catch (e) { replace(msg, note(`${e.message}${e.code ? ` (${e.code})` : ''}`, 'error')); }
  });

  const jobs = (jobList.items || []).map((j) => h('tr', { dataset: { id: j.id, reason: j.exit_reason || '' } },
    h('td', {}, h('a', { href: `#/jobs/${enc(j.id)}` }, j.id)), h('td', {}, exitBadge(j)),
    h('td', { class: 'exit' }, exitSummary(j) || '–'),
    h('td', {}, h('code', { class: 'what' }, jobWhat(j).slice(0, 120))), h('td', {}, fmtTime(j.created_at))));
  const services = (sb.services || []).map((s) => h('tr', {}, h('td', {}, s.name), h('td', {}, badge(s.state)), h('td', {}, String(s.restarts)),
    h('td', {}, s.job_id ? h('a', { href: `#/jobs/${enc(s.job_id)}` }, 'log') : '–'), h('td', {}, s.error || '')));

  const endpoints = (sb.endpoints || []).map((e) => {
    const out = h('span', {});
    return h('tr', {}, h('td', {}, e.name), h('td', {}, String(e.port)), h('td', {}, e.protocol),
      h('td', {}, e.protocol === 'tcp' ? '–' : h('button', {
        type: 'button', class: 'small', onclick: async () => {
          try {
            const l = await post(`${base}/ports/${e.port}/links`, { ttl_seconds: 3600 });
            replace(out, h('a', { href: l.url, target: '_blank', rel: 'noopener noreferrer' }, 'open preview (1 h)'));
          } catch (err) { replace(out, note(err.message, 'error')); }
        },
      }, 'Make preview link'), ' ', out));
  });
  const portForm = h('form', { class: 'inline', 'aria-label': 'Preview link to any port' },
    field('Port', h('input', { name: 'port', type: 'number', min: '1', max: '65535', required: true })),
    h('button', { type: 'submit', class: 'small' }, 'Preview link'));
  const portOut = h('div', {});
  portForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      const l = await post(`${base}/ports/${Number(new FormData(portForm).get('port'))}/links`, { ttl_seconds: 3600 });
      replace(portOut, h('a', { href: l.url, target: '_blank', rel: 'noopener noreferrer' }, l.url));
    } catch (err) { replace(portOut, note(`${err.message}${err.code ? ` (${err.code})` : ''}`, 'error')); }
  });

  const net = sb.network || { mode: 'none', status: 'none' };
  const events = h('div', {}, h('p', { class: 'muted' }, 'Loading egress events…'));
  if (net.mode !== 'none') {
    get(`${base}/network/events`, { limit: 100 }).then((l) => replace(events, table('Egress events', ['Time', 'Decision', 'Proto', 'Name', 'Address', 'Port', 'Up', 'Down', 'Reason'],
      (l.items || []).map((e) => h('tr', {}, h('td', {}, fmtTime(e.time)), h('td', {}, badge(e.decision)), h('td', {}, e.proto), h('td', {}, e.name || ''),
        h('td', {}, e.address || ''), h('td', {}, e.port ? String(e.port) : ''), h('td', {}, fmtBytes(e.bytes_up)), h('td', {}, fmtBytes(e.bytes_down)), h('td', {}, e.reason || ''))),
      'No egress events yet.'))).catch((e) => replace(events, note(e.message, 'error')));
  } else replace(events, h('p', { class: 'muted' }, 'No network: the sandbox has only loopback, so there are no egress events.'));

  // The sandbox's history: the audit records about it (oldest first).
  const history = h('div', { id: 'history' }, h('p', { class: 'muted' }, 'Loading…'));
  get('/v1/audit', { target: sb.id, limit: 100 }).then((p) => replace(history, table('History', ['Time', 'Action', 'Status', 'Actor'],
    (p.items || []).map((a) => h('tr', {}, h('td', {}, fmtTime(a.time)), h('td', {}, h('code', {}, a.action)),
      h('td', {}, badge(String(a.status), a.status >= 400 ? 'failed' : 'ready')), h('td', {}, a.actor)))),
  p.has_more ? h('a', { href: `#/audit?target=${enc(sb.id)}` }, 'More in the audit log') : null))
    .catch((e) => replace(history, note(e.message, 'error')));

  replace(root,
    h('div', { class: 'title-row' }, h('h1', { id: 'sandbox-title' }, `Sandbox ${sb.id}`),
      // An ended sandbox keeps its trace; it has no files, terminal or
      // expiry any more.
      h('div', { class: 'actions' },
        live ? h('a', { class: 'button', href: `#/sandboxes/${enc(sb.id)}/files`, id: 'open-files' }, 'Files') : null,
        live ? h('a', { class: 'button', href: `#/sandboxes/${enc(sb.id)}/changes`, id: 'open-changes' }, 'Changes') : null,
        live ? h('a', { class: 'button', href: `#/sandboxes/${enc(sb.id)}/terminal`, id: 'open-terminal' }, 'Terminal') : null,
        h('a', { class: 'button', href: `#/traces/${enc(sb.id)}`, id: 'open-trace' }, 'Trace'),
        !live ? null : h('button', { type: 'button', id: 'renew', title: "Expire one hour from now (a leased sandbox: renew its lease)", onclick: async () => {
          try { await post(`${base}/renew`, { ttl_seconds: 3600 }); refresh(); } catch (e) { replace(msg, note(`${e.message}${e.code ? ` (${e.code})` : ''}`, 'error')); }
        } }, 'Renew 1 h'),
        ['destroyed'].includes(sb.state) ? null : h('button', { type: 'button', class: 'danger', onclick: async () => {
          if (!confirm(`Delete sandbox ${sb.id}?`)) return;
          try { await del(base); go('/sandboxes'); } catch (e) { replace(msg, note(e.message, 'error')); }
        } }, 'Delete'))),
    msg, facts, live ? stateSection(sb, snaps, takeFlash(sb.id), refresh) : null,
    desktop ? await desktopSection(sb.id, refresh) : null, run,
    h('section', { 'aria-labelledby': 'jobs-title', id: 'jobs' }, h('h2', { id: 'jobs-title' }, 'Jobs'),
      table('Jobs, newest first (the last 50)', ['Job', 'State', 'Exit', 'Command', 'Created'], jobs, jobList.error ? `The jobs could not be listed: ${jobList.error}` : 'No job has run in this sandbox yet.')),
    services.length ? h('section', {}, h('h2', {}, 'Services'), table('Services', ['Name', 'State', 'Restarts', 'Log', 'Error'], services)) : null,
    h('section', { 'aria-labelledby': 'ports-title' }, h('h2', { id: 'ports-title' }, 'Endpoints and ports'),
      table('Endpoints', ['Name', 'Port', 'Protocol', 'Preview'], endpoints, 'The profile names no endpoints.'), portForm, portOut),
    h('section', { 'aria-labelledby': 'net-title' }, h('h2', { id: 'net-title' }, 'Network'),
      h('p', {}, 'Mode ', badge(net.mode), ' status ', badge(net.status), net.status_reason ? ` – ${net.status_reason}` : ''), events),
    h('section', { 'aria-labelledby': 'history-title' }, h('h2', { id: 'history-title' }, 'History'), history));
}

// desktopSection is a desktop sandbox's control: who holds it, the agent's
// requests for a person, and the live view (the desktops view's buttons).
async function desktopSection(id, refresh) {
  const c = await getControl(id);
  const msg = h('div', { 'aria-live': 'polite', id: 'desktop-msg' });
  return h('section', { 'aria-labelledby': 'desktop-title', id: 'desktop', class: 'card' },
    h('h2', { id: 'desktop-title' }, 'Desktop'),
    h('p', {}, 'Control: ', h('span', { class: 'holder' }, holderText(c)), ' ', requestsText(c)),
    h('div', { class: 'actions' }, controlButtons(id, msg, refresh)),
    h('p', { class: 'muted' }, 'Taking over stops the agent at once until you release; the live view opens in a new tab with a link that expires in 10 minutes.'),
    msg);
}
