import { h, replace, table, badge, note, fmtBytes, field, saveBlob } from '../dom.js';
import { get, request, enc } from '../api.js';

// diffLines classifies the lines of a file's git-format diff for display:
// meta (the diff --git, mode and ---/+++ headers), hunk (@@), add, del,
// context and note (\ No newline at end of file).
export function diffLines(text) {
  const lines = (text || '').split('\n');
  if (lines.length && lines[lines.length - 1] === '') lines.pop();
  let inHunk = false;
  return lines.map((l) => {
    if (l.startsWith('@@')) { inHunk = true; return { cls: 'hunk', text: l }; }
    if (!inHunk) return { cls: 'meta', text: l };
    if (l.startsWith('+')) return { cls: 'add', text: l };
    if (l.startsWith('-')) return { cls: 'del', text: l };
    if (l.startsWith('\\')) return { cls: 'note', text: l };
    return { cls: 'context', text: l };
  });
}

// changesView is a sandbox's "Changes": its workspace against a base (its
// creation, one of its snapshots or another sandbox), file by file, with
// the patch to download.
export async function changesView(root, { params: [id], query, go }) {
  const base = `/v1/sandboxes/${enc(id)}`;
  const against = query.get('base') || 'creation';
  const [sb, snaps] = await Promise.all([get(base), get(`${base}/snapshots`).catch(() => ({ items: [] }))]);
  const msg = h('div', { 'aria-live': 'polite', id: 'changes-msg' });
  const fail = (e) => replace(msg, note(`${e.message}${e.code ? ` (${e.code})` : ''}`, 'error'));

  const options = [['creation', 'its creation'], ['git', 'its git HEAD'], ...(snaps.items || []).filter((s) => s.state === 'ready')
    .map((s) => [s.id, `snapshot ${s.name ? s.name + ' ' : ''}(${s.id})`])];
  if (!options.some(([v]) => v === against)) options.push([against, against]);
  const pick = h('select', { name: 'base', id: 'changes-base' }, options.map(([v, t]) => h('option', { value: v, selected: v === against }, t)));
  const other = h('input', { name: 'other', id: 'changes-other', placeholder: 'sbx_… or snap_…', autocomplete: 'off' });
  const form = h('form', { class: 'inline', id: 'changes-form', 'aria-label': 'Compare with' },
    field('Compare with', pick), field('or another sandbox or snapshot', other), h('button', { type: 'submit' }, 'Compare'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    go(`/sandboxes/${sb.id}/changes`, { base: other.value.trim() || pick.value });
  });

  const body = h('div', { id: 'changes' }, h('p', { class: 'muted' }, 'Comparing…'));
  const dl = h('button', { type: 'button', id: 'download-patch', onclick: async () => {
    try {
      const blob = await request('GET', `${base}/diff`, { query: { base: against, format: 'patch' }, as: 'blob' });
      saveBlob(blob, `${sb.id}.patch`);
    } catch (e) { fail(e); }
  } }, 'Download patch');

  replace(root,
    h('div', { class: 'title-row' }, h('h1', {}, `Changes in sandbox ${sb.id}`),
      h('div', { class: 'actions' }, h('a', { class: 'button', href: `#/sandboxes/${enc(sb.id)}` }, 'Sandbox'),
        h('a', { class: 'button', href: `#/sandboxes/${enc(sb.id)}/files` }, 'Files'), dl)),
    h('p', { class: 'muted' }, 'The workspace (/workspace) against a base, as git shows it; binary and large files are named, not shown. Apply a patch with genesis patch or POST …/patch.'),
    form, msg, body);

  let d;
  try { d = await get(`${base}/diff`, { base: against }); } catch (e) { replace(body, note(`${e.message}${e.code ? ` (${e.code})` : ''}`, 'error')); return; }
  const s = d.summary;
  const kind = (st) => ({ added: 'ok', deleted: 'failed', modified: 'warn' }[st] || '');
  const rows = d.files.map((f, i) => h('tr', { dataset: { path: f.path, status: f.status } },
    h('td', {}, badge(f.status, kind(f.status))),
    h('td', {}, h('a', { href: `#/sandboxes/${enc(sb.id)}/changes?base=${enc(against)}`, onclick: (ev) => { ev.preventDefault(); document.getElementById(`file-${i}`)?.scrollIntoView(); } }, f.path)),
    h('td', { class: 'num' }, `+${f.additions}`), h('td', { class: 'num' }, `−${f.deletions}`),
    h('td', { class: 'num' }, `${fmtBytes(f.old_size)} → ${fmtBytes(f.new_size)}`),
    h('td', {}, f.old_mode && f.new_mode && f.old_mode !== f.new_mode ? `${f.old_mode} → ${f.new_mode}` : (f.new_mode || f.old_mode || ''))));
  const files = d.files.map((f, i) => h('section', { class: 'card diff-file', id: `file-${i}`, dataset: { path: f.path } },
    h('h3', {}, f.path, ' ', badge(f.status, kind(f.status))),
    f.binary ? note('Binary file: its content is not shown.')
      : f.too_large ? note('Too large to show line by line: compared by checksum.')
        : f.diff ? h('pre', { class: 'diff' }, diffLines(f.diff).map((l) => h('span', { class: l.cls }, l.text + '\n')))
          : note(d.truncated ? 'Not shown: the diff is over its size limit.' : 'Only the mode changed.')));
  replace(body,
    h('p', { id: 'changes-summary' }, `${s.files} files changed against ${d.base}: ${s.added} added, ${s.modified} modified, ${s.deleted} deleted, ${s.mode_changed} mode changed; +${s.additions} −${s.deletions} lines.`),
    d.truncated ? note(`Truncated: ${d.truncated_reason}`, 'error') : null,
    table('Changed files', ['Status', 'Path', 'Added', 'Removed', 'Size', 'Mode'], rows, 'No change: the workspace is the same as its base.'),
    files);
}
