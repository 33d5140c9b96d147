// snapshots.js: the tenant's snapshots (#/snapshots?sandbox=ID), newest
// first, with a new sandbox from one and delete; and the words the
// sandbox's page uses for what a suspension or a restore kept.
import { h, replace, table, badge, note, fmtTime, fmtRelative, fmtBytes, field, newestFirst } from '../dom.js';
import { get, post, del, enc } from '../api.js';

// holds says what a snapshot holds.
export function holds(sn) {
  return sn.memory ? 'files, processes and memory' : 'files only';
}

// restoredText says what came back into a sandbox made from a snapshot
// (memory_restored of a create, a fork's copy, a wake or a rollback).
export function restoredText(memory) {
  return memory ? 'with its processes and memory' : 'with its files only (its processes started afresh)';
}

// suspensionText says, of a paused or hibernated sandbox, since when,
// what it keeps and the operation under way; '' for any other.
export function suspensionText(sb) {
  const s = sb.suspension;
  if (!s) return '';
  let t = `${sb.state === 'hibernated' ? 'hibernated' : 'paused'} since ${fmtTime(s.since)} (${fmtRelative(s.since)})`;
  if (sb.state === 'hibernated') {
    t += s.memory ? '; its files, processes and memory are kept on disk: it wakes where it was'
      : '; its files are kept on disk: it wakes with its files only (its processes start afresh)';
  } else {
    t += '; its processes are frozen and its memory kept';
  }
  if (s.operation) t += `; ${s.operation} now`;
  return t;
}

// wokenText is what a resume answered: a thawed sandbox is resumed; a
// woken one says whether its processes and memory came back when the
// answer says (memory_restored).
export function wokenText(wasHibernated, out) {
  if (!wasHibernated) return 'Resumed.';
  return out.memory_restored === undefined ? 'Woken.' : `Woken ${restoredText(!!out.memory_restored)}.`;
}

// sessionsText renders the snapshot's sessions and code contexts with
// their copies in the new sandbox: "ses_a → ses_b, ctx_c → ctx_d".
export function sessionsText(m) {
  return Object.keys(m || {}).sort().map((k) => `${k} → ${m[k]}`).join(', ');
}

// madeText is what the page of a sandbox made from a snapshot says first.
export function madeText(sb, how) {
  const copies = sessionsText(sb.sessions_from_snapshot);
  return `${how} ${restoredText(!!sb.memory_restored)}.${copies ? ` Its sessions and code contexts: ${copies}.` : ''}`;
}

// A note for the next rendering of a sandbox's page: what the answer of
// the action that led there said (memory_restored is on the answer only).
let flash = null;
export function setFlash(id, text) { flash = { id, text }; }
export function takeFlash(id) {
  if (!flash || flash.id !== id) return '';
  const t = flash.text;
  flash = null;
  return t;
}

// newFromSnapshot makes a sandbox from snapshot sn and opens its page.
export async function newFromSnapshot(sn, go) {
  const sb = await post('/v1/sandboxes', { snapshot_id: sn.id }, { headers: { 'Idempotency-Key': crypto.randomUUID() } });
  setFlash(sb.id, madeText(sb, `Made from snapshot ${sn.name || sn.id}`));
  go(`/sandboxes/${sb.id}`);
}

export async function snapshotsView(root, { query, go, refresh }) {
  const of = query.get('sandbox') || '';
  const list = await get(of ? `/v1/sandboxes/${enc(of)}/snapshots` : '/v1/snapshots');
  const items = newestFirst(list.items || []);
  const msg = h('div', { 'aria-live': 'polite', id: 'snapshots-msg' });
  const fail = (e) => replace(msg, note(`${e.message}${e.code ? ` (${e.code})` : ''}`, 'error'));

  const rows = items.map((sn) => h('tr', { dataset: { id: sn.id, memory: String(!!sn.memory) } },
    h('td', { class: 'nowrap' }, sn.id), h('td', {}, sn.name || '–'),
    h('td', { class: 'nowrap' }, h('a', { href: `#/sandboxes/${enc(sn.sandbox_id)}` }, sn.sandbox_id)),
    h('td', {}, badge(sn.state), sn.error ? ` ${sn.error}` : ''),
    h('td', { class: 'nowrap' }, sn.profile), h('td', {}, sn.runtime),
    h('td', { class: 'holds' }, holds(sn)), h('td', { class: 'num nowrap' }, fmtBytes(sn.size_bytes)),
    h('td', { class: 'nowrap' }, h('span', { title: fmtTime(sn.created_at) }, fmtRelative(sn.created_at))),
    h('td', { class: 'nowrap' }, sn.expires_at ? h('span', { title: fmtTime(sn.expires_at) }, fmtRelative(sn.expires_at)) : 'kept until deleted'),
    h('td', { class: 'actions' },
      h('button', { type: 'button', class: 'small', 'data-action': 'new-sandbox', disabled: sn.state !== 'ready', 'aria-label': `New sandbox from ${sn.id}`,
        onclick: async (ev) => {
          ev.target.disabled = true;
          replace(msg, note(`Starting a sandbox from ${sn.id}…`));
          try { await newFromSnapshot(sn, go); } catch (e) { ev.target.disabled = false; fail(e); }
        } }, 'New sandbox from this'),
      h('button', { type: 'button', class: 'small danger', 'data-action': 'delete', 'aria-label': `Delete ${sn.id}`,
        onclick: async () => {
          if (!confirm(`Delete snapshot ${sn.id}? Sandboxes made from it keep running.`)) return;
          try { await del(`/v1/snapshots/${enc(sn.id)}`); refresh(); } catch (e) { fail(e); }
        } }, 'Delete'))));

  const total = items.reduce((n, sn) => n + (sn.size_bytes || 0), 0);
  replace(root,
    h('div', { class: 'title-row' }, h('h1', {}, of ? `Snapshots of ${of}` : 'Snapshots'),
      h('span', { class: 'muted', id: 'snapshot-count' }, `${items.length} listed, newest first, ${fmtBytes(total)} in all`)),
    of ? h('p', {}, h('a', { href: `#/sandboxes/${enc(of)}` }, `Back to sandbox ${of}`), ' · ', h('a', { href: '#/snapshots' }, 'All snapshots')) : null,
    msg,
    table('Snapshots, newest first', ['Snapshot', 'Name', 'Sandbox', 'State', 'Profile', 'Runtime', 'Holds', 'Size', 'Taken', 'Expires', ''], rows,
      of ? 'This sandbox has no snapshots.' : 'No snapshots yet: take one on a sandbox’s page (Take snapshot), or with genesis sandbox snapshot SANDBOX.'),
    h('p', { class: 'muted' }, 'A snapshot holds a sandbox’s files, and under runsc its processes and memory too. A new sandbox from it starts where the snapshot was taken.'));
}

// stateSection is the saved-state part of a sandbox's page: its
// suspension, the buttons that pause, resume, hibernate, snapshot, fork
// and roll it back, and its snapshots. snaps is its snapshot list, or
// null when the service keeps no snapshots; said is what the action that
// led to this rendering answered.
export function stateSection(sb, snaps, said, refresh) {
  const base = `/v1/sandboxes/${enc(sb.id)}`;
  const msg = h('div', { 'aria-live': 'polite', id: 'state-msg' }, said ? note(said) : null);
  const fail = (e) => replace(msg, note(`${e.message}${e.code ? ` (${e.code})` : ''}`, 'error'));
  const running = ['ready', 'leased', 'busy', 'idle'].includes(sb.state);
  const paused = sb.state === 'paused';
  const hibernated = sb.state === 'hibernated';
  const busy = !!(sb.suspension && sb.suspension.operation);
  const ready = (snaps || []).filter((s) => s.state === 'ready');

  // act runs one call, disabling the section's buttons while it runs, and
  // shows the page again with what it said.
  const act = async (label, call, said) => {
    for (const b of section.querySelectorAll('button')) b.disabled = true;
    replace(msg, note(`${label}…`));
    try {
      const out = await call();
      setFlash(sb.id, said(out));
      refresh();
    } catch (e) {
      fail(e);
      for (const b of section.querySelectorAll('button')) b.disabled = b.dataset.off === '1';
    }
  };
  const button = (action, label, on, title, onclick, cls) => h('button', {
    type: 'button', class: cls || '', 'data-action': action, 'data-off': on ? null : '1', disabled: !on || busy, title, onclick,
  }, label);

  const forkForm = h('form', { class: 'inline', id: 'fork-form', hidden: true, 'aria-label': 'Fork this sandbox' },
    field('Copies', h('input', { name: 'count', id: 'fork-count', type: 'number', min: '1', max: '16', value: '2', required: true })),
    h('button', { type: 'submit', id: 'fork-submit' }, 'Make copies'));
  const forkOut = h('div', { id: 'fork-out' });
  forkForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const count = Number(new FormData(forkForm).get('count'));
    replace(forkOut, note(`Making ${count} ${count === 1 ? 'copy' : 'copies'}…`));
    try {
      const res = await post(`${base}/fork`, { count });
      replace(forkOut, h('ul', { id: 'fork-made' },
        (res.sandboxes || []).map((c) => h('li', { dataset: { id: c.id, memory: String(!!c.memory_restored) } },
          h('a', { href: `#/sandboxes/${enc(c.id)}` }, c.id), ` ${restoredText(!!c.memory_restored)}`,
          sessionsText(c.sessions_from_snapshot) ? `; sessions ${sessionsText(c.sessions_from_snapshot)}` : '')),
        (res.errors || []).map((e) => h('li', { class: 'error' }, `a copy failed: ${e.detail} (${e.code})`))));
    } catch (e) { replace(forkOut, note(`${e.message}${e.code ? ` (${e.code})` : ''}`, 'error')); }
  });

  const pick = h('select', { name: 'snapshot_id', id: 'rollback-snapshot', required: true },
    ready.map((s) => h('option', { value: s.id }, `${s.name ? `${s.name} – ` : ''}${s.id} (${fmtTime(s.created_at)}, ${holds(s)})`)));
  const rollbackForm = h('form', { class: 'inline', id: 'rollback-form', hidden: true, 'aria-label': 'Roll this sandbox back to a snapshot' },
    field('Snapshot', pick),
    h('button', { type: 'submit', class: 'danger', id: 'rollback-submit' }, 'Roll back'));
  rollbackForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const id = pick.value;
    if (!confirm(`Roll sandbox ${sb.id} back to snapshot ${id}? What changed since it was taken is lost.`)) return;
    act('Rolling back', () => post(`${base}/rollback`, { snapshot_id: id }), (out) => `Rolled back to snapshot ${id} ${restoredText(!!out.memory_restored)}.`);
  });

  const section = h('section', { 'aria-labelledby': 'state-title', id: 'state', class: 'card' },
    h('h2', { id: 'state-title' }, 'Saved state'),
    h('p', { id: 'suspension', dataset: { state: sb.state } },
      paused || hibernated ? suspensionText(sb) : running ? 'Running.' : `${sb.state}: nothing to pause or save.`),
    h('div', { class: 'actions' },
      button('pause', 'Pause', running, 'Freeze its processes, keeping its memory; calls into it are refused until it is resumed',
        () => act('Pausing', () => post(`${base}/pause`, {}), () => 'Paused: its processes are frozen and its memory kept.')),
      button('resume', 'Resume', paused || hibernated, hibernated ? 'Wake it from its saved state' : 'Thaw its processes',
        () => act(hibernated ? 'Waking' : 'Resuming', () => post(`${base}/resume`, {}),
          (out) => wokenText(hibernated, out))),
      button('hibernate', 'Hibernate', running || paused, 'Save its state to disk and remove its container, freeing its memory',
        () => act('Hibernating', () => post(`${base}/hibernate`, {}),
          (out) => `Hibernated: ${out.suspension && out.suspension.memory ? 'its files, processes and memory are' : 'its files are'} on disk.`)),
      snaps === null ? null : button('snapshot', 'Take snapshot', running || paused, 'Save its state as a new snapshot; it is frozen only while the state is copied',
        () => act('Taking a snapshot', () => post(`${base}/snapshots`, {}), (sn) => `Snapshot ${sn.id} taken: ${holds(sn)}, ${fmtBytes(sn.size_bytes)}.`)),
      snaps === null ? null : button('fork', 'Fork…', running || paused, 'Make copies of it, each a new sandbox with its state',
        () => { forkForm.hidden = !forkForm.hidden; if (!forkForm.hidden) forkForm.querySelector('input').focus(); }, 'ghost'),
      snaps === null ? null : button('rollback', 'Roll back…', (running || paused) && ready.length > 0,
        ready.length ? 'Return it to one of its snapshots' : 'It has no snapshot to return to',
        () => { rollbackForm.hidden = !rollbackForm.hidden; if (!rollbackForm.hidden) pick.focus(); }, 'ghost')),
    forkForm, forkOut, rollbackForm, msg,
    snaps === null ? h('p', { class: 'muted' }, 'This service keeps no snapshots.') : h('div', { id: 'sandbox-snapshots' },
      table('Its snapshots, newest first', ['Snapshot', 'Name', 'Holds', 'Size', 'Taken'],
        newestFirst(snaps).map((s) => h('tr', { dataset: { id: s.id } }, h('td', {}, s.id), h('td', {}, s.name || '–'), h('td', {}, s.state === 'ready' ? holds(s) : badge(s.state)),
          h('td', { class: 'num' }, fmtBytes(s.size_bytes)), h('td', {}, fmtTime(s.created_at))))
        , 'No snapshots of this sandbox yet.'),
      snaps.length ? h('p', {}, h('a', { href: `#/snapshots?sandbox=${enc(sb.id)}`, id: 'open-snapshots' }, 'In the snapshots view')) : null));
  return section;
}
