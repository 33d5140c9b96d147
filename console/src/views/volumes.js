// volumes.js: the tenant's named volumes (#/volumes) by name, with their
// size, state and the sandboxes that hold them, and delete (asked first;
// refused while a sandbox mounts the volume). docs/volumes.md.
import { h, replace, table, badge, note, fmtTime, fmtRelative } from '../dom.js';
import { get, del, enc } from '../api.js';

// fmtMB renders a size in MiB ("512 MiB", "2 GiB", "1.5 GiB").
export function fmtMB(mb) {
  if (!Number.isFinite(mb) || mb <= 0) return '–';
  if (mb < 1024) return `${mb} MiB`;
  const g = mb / 1024;
  return `${Number.isInteger(g) ? g : g.toFixed(1)} GiB`;
}

// fmtBytes renders a byte count in binary units ("0 B", "12 KiB",
// "3.4 MiB", "1.2 GiB").
export function fmtBytes(n) {
  if (!Number.isFinite(n) || n < 0) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i === 0 || Number.isInteger(n) ? n : n.toFixed(1)} ${units[i]}`;
}

// usedText says how full a volume is: "3.4 MiB / 1 GiB (1%)", or the
// size alone when the service does not know the used bytes (the volume's
// filesystem is not mounted on its host right now).
export function usedText(v) {
  if (!Number.isFinite(v.used_bytes)) return `– / ${fmtMB(v.size_mb)}`;
  const pct = v.size_mb > 0 ? Math.min(100, Math.round((100 * v.used_bytes) / (v.size_mb * 1048576))) : 0;
  return `${fmtBytes(v.used_bytes)} / ${fmtMB(v.size_mb)} (${pct}%)`;
}

// holdersText says who holds a volume: "not mounted", "written by S at
// /mnt/data" or "read by 2 sandboxes".
export function holdersText(v) {
  const m = v.mounts || [];
  if (!m.length) return 'not mounted';
  const w = m.find((x) => !x.read_only);
  if (w) return `written by ${w.sandbox_id} at ${w.path}`;
  return m.length === 1 ? `read by ${m[0].sandbox_id} at ${m[0].path}` : `read by ${m.length} sandboxes`;
}

export async function volumesView(root, { refresh }) {
  let list;
  try {
    list = await get('/v1/volumes');
  } catch (e) {
    if (e.code !== 'volumes_unsupported') throw e;
    replace(root, h('h1', {}, 'Volumes'), note(`${e.message} (${e.code})`));
    return;
  }
  const items = (list.items || []).slice().sort((a, b) => a.name.localeCompare(b.name));
  const msg = h('div', { 'aria-live': 'polite', id: 'volumes-msg' });
  const fail = (e) => replace(msg, note(`${e.message}${e.code ? ` (${e.code})` : ''}`, 'error'));

  const rows = items.map((v) => h('tr', { dataset: { name: v.name, id: v.id, holders: String((v.mounts || []).length) } },
    h('td', { class: 'nowrap' }, v.name), h('td', { class: 'nowrap muted' }, v.id),
    h('td', { class: 'num nowrap size', dataset: { used: String(v.used_bytes ?? '') } }, usedText(v)),
    h('td', {}, badge(v.state)),
    h('td', { class: 'holders' }, holdersText(v), (v.mounts || []).length ? h('ul', { class: 'plain' },
      v.mounts.map((m) => h('li', { dataset: { sandbox: m.sandbox_id } },
        h('a', { href: `#/sandboxes/${enc(m.sandbox_id)}` }, m.sandbox_id), ` ${m.path} ${m.read_only ? '(read-only)' : '(writable)'}`))) : null),
    h('td', { class: 'nowrap' }, h('span', { title: fmtTime(v.created_at) }, fmtRelative(v.created_at))),
    h('td', { class: 'actions' },
      h('button', { type: 'button', class: 'small danger', 'data-action': 'delete', 'aria-label': `Delete volume ${v.name}`,
        title: (v.mounts || []).length ? 'A mounted volume cannot be deleted: end the sandboxes that hold it first' : 'Delete it and its files',
        onclick: async () => {
          if (!confirm(`Delete volume ${v.name} and every file on it? This cannot be undone.`)) return;
          try { await del(`/v1/volumes/${enc(v.name)}`); refresh(); } catch (e) { fail(e); }
        } }, 'Delete'))));

  const total = items.reduce((n, v) => n + (v.size_mb || 0), 0);
  replace(root,
    h('div', { class: 'title-row' }, h('h1', {}, 'Volumes'),
      h('span', { class: 'muted', id: 'volume-count' }, `${items.length} listed, ${fmtMB(total)} in all`)),
    msg,
    table('Volumes, by name', ['Name', 'ID', 'Used / size', 'State', 'Held by', 'Created', ''], rows,
      'No volumes yet: make one with genesis volume create NAME --size-mb 1024, or POST /v1/volumes.'),
    h('p', { class: 'muted' }, 'A volume is a named directory with a hard size limit that outlives the sandboxes it is mounted into: one writer or any number of readers at a time.'));
}
