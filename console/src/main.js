// main.js: sign-in, the header, the theme and the hash router. Every view
// has its own URL (#/sandboxes/ID, #/jobs/ID, …) so a link can be shared
// and a reload shows the same view.
import { h, replace, note, field } from './dom.js';
import { session, request, whenSignedOut, ApiError } from './api.js';
import { startSampler } from './metrics.js';
import { sandboxesView } from './views/sandboxes.js';
import { sandboxView } from './views/sandbox.js';
import { jobView } from './views/job.js';
import { filesView, fileView } from './views/files.js';
import { changesView } from './views/changes.js';
import { terminalView } from './views/terminal.js';
import { leasesView, poolsView } from './views/leases.js';
import { tenantsView } from './views/tenants.js';
import { auditView } from './views/audit.js';
import { systemView } from './views/system.js';
import { notFoundView } from './views/misc.js';
import { desktopsView } from './views/desktops.js';
import { tracesView, traceView } from './views/traces.js';
import { snapshotsView } from './views/snapshots.js';
import { volumesView } from './views/volumes.js';

const routes = [
  [/^\/sandboxes$/, sandboxesView, 'sandboxes'],
  [/^\/sandboxes\/([^/]+)$/, sandboxView, 'sandboxes'],
  [/^\/sandboxes\/([^/]+)\/files$/, filesView, 'sandboxes'],
  [/^\/sandboxes\/([^/]+)\/files\/view$/, fileView, 'sandboxes'],
  [/^\/sandboxes\/([^/]+)\/changes$/, changesView, 'sandboxes'],
  [/^\/sandboxes\/([^/]+)\/terminal$/, terminalView, 'sandboxes'],
  [/^\/jobs\/([^/]+)$/, jobView, 'sandboxes'],
  [/^\/snapshots$/, snapshotsView, 'snapshots'],
  [/^\/volumes$/, volumesView, 'volumes'],
  [/^\/leases$/, leasesView, 'leases'],
  [/^\/pools$/, poolsView, 'pools'],
  [/^\/tenants$/, tenantsView, 'tenants'],
  [/^\/audit$/, auditView, 'audit'],
  [/^\/system$/, systemView, 'system'],
  [/^\/desktop$/, desktopsView, 'desktop'],
  [/^\/traces$/, tracesView, 'traces'],
  [/^\/traces\/([^/]+)$/, traceView, 'traces'],
];

const nav = [
  ['sandboxes', 'Sandboxes'], ['snapshots', 'Snapshots'], ['volumes', 'Volumes'], ['leases', 'Leases'], ['pools', 'Pools'], ['tenants', 'Tenants', true],
  ['audit', 'Audit log'], ['system', 'System'], ['desktop', 'Desktops'], ['traces', 'Traces'],
];

const main = document.getElementById('main');
const top = document.getElementById('top');
let cleanup = null;
let renderSeq = 0;

// Theme: the system's by default, or the one chosen (kept in localStorage:
// it is no secret).
function applyTheme() {
  const t = localStorage.getItem('genesis.theme');
  if (t) document.documentElement.dataset.theme = t;
  else delete document.documentElement.dataset.theme;
}
function toggleTheme() {
  const dark = document.documentElement.dataset.theme
    ? document.documentElement.dataset.theme === 'dark'
    : matchMedia('(prefers-color-scheme: dark)').matches;
  localStorage.setItem('genesis.theme', dark ? 'light' : 'dark');
  applyTheme();
}

export function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/sandboxes';
  const [path, qs] = raw.split('?');
  return { path, query: new URLSearchParams(qs || '') };
}

// go navigates to a view (#/path?query).
export function go(path, query) {
  const qs = query ? new URLSearchParams(Object.entries(query).filter(([, v]) => v !== '' && v != null)).toString() : '';
  location.hash = '#' + path + (qs ? '?' + qs : '');
}

function header(active) {
  const links = nav.filter(([, , admin]) => !admin || session.admin).map(([id, label]) =>
    h('li', {}, h('a', { href: `#/${id}`, 'aria-current': id === active ? 'page' : null }, label)));
  replace(top,
    h('div', { class: 'brand' }, h('a', { href: '#/sandboxes' }, 'Genesis Sandbox')),
    session.key ? h('nav', { 'aria-label': 'Main' }, h('ul', {}, links)) : null,
    h('div', { class: 'tools' },
      session.key ? h('span', { class: 'muted', id: 'who' }, `${session.tenant}${session.admin ? ' (admin)' : ''}`) : null,
      session.actAs ? h('span', { class: 'acting', id: 'acting', role: 'status' }, `acting for ${session.actAs}`) : null,
      session.actAs ? h('button', { type: 'button', class: 'ghost', id: 'stop-acting', onclick: () => { session.setActAs(''); go('/sandboxes'); render(); } }, 'Stop acting') : null,
      h('button', { type: 'button', class: 'ghost', onclick: toggleTheme, 'aria-label': 'Switch between dark and light theme' }, 'Theme'),
      session.key ? h('button', { type: 'button', class: 'ghost', id: 'signout', onclick: signOut }, 'Sign out') : null));
}

function signOut() {
  session.clear();
  render();
}

function signIn(message) {
  header('');
  const input = h('input', { type: 'password', name: 'key', autocomplete: 'off', required: true, spellcheck: 'false', id: 'key' });
  const msg = h('div', { id: 'signin-msg' }, message ? note(message, 'error') : null);
  const form = h('form', { class: 'card narrow', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title' }, 'Sign in'),
    h('p', { class: 'muted' }, 'Use an API key of the service. It is kept in this tab only (session storage) and sent only in the Authorization header.'),
    field('API key', input),
    h('button', { type: 'submit', id: 'signin' }, 'Sign in'),
    msg);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const key = input.value.trim();
    replace(msg, note('Checking…'));
    let me;
    try {
      me = await request('GET', '/v1/whoami', { key });
    } catch (e) {
      const why = e instanceof ApiError && e.status === 401
        ? `This key was not accepted (${e.code || 'unauthenticated'}): check it, or ask for a new one if it was revoked.`
        : `Could not sign in: ${e.message}`;
      replace(msg, note(why, 'error'));
      input.focus();
      return;
    }
    session.set(key, me.admin, me.tenant);
    render();
  });
  replace(main, form);
  input.focus();
}

whenSignedOut(() => {
  session.clear();
  signIn('Your key is no longer accepted; sign in again.');
});

async function render() {
  if (cleanup) { try { cleanup(); } catch { /* view gone */ } cleanup = null; }
  const seq = ++renderSeq;
  if (!session.key) { signIn(); return; }
  const { path, query } = parseHash();
  // An admin's link to another tenant's page (?as=TENANT) acts for it
  // until "Stop acting" or sign-out.
  if (session.admin && query.has('as')) session.setActAs(query.get('as'));
  const hit = routes.map(([re, view, tab]) => [path.match(re), view, tab]).find(([m]) => m);
  header(hit ? hit[2] : '');
  const root = h('div', { class: 'view' });
  replace(main, root);
  if (!hit) { notFoundView(root, 'There is no such page in the console.'); return; }
  const [m, view] = hit;
  try {
    const c = await view(root, { params: m.slice(1).map(decodeURIComponent), query, go, refresh: render });
    if (seq !== renderSeq) { if (typeof c === 'function') c(); return; }
    cleanup = typeof c === 'function' ? c : null;
  } catch (e) {
    if (seq !== renderSeq) return;
    if (e instanceof ApiError && e.status === 404) notFoundView(root, e.message);
    else if (!(e instanceof ApiError && e.status === 401)) replace(root, note(`${e.message}${e.code ? ` (${e.code})` : ''}`, 'error'));
  }
  const h1 = root.querySelector('h1');
  if (h1) document.title = `${h1.textContent} – Genesis Sandbox`;
}

applyTheme();
window.addEventListener('hashchange', () => { render(); main.focus({ preventScroll: true }); });
startSampler();
render();
