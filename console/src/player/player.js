// player.js: the trace player — a sandbox's trace as a timeline: the
// events in order (filter by actor and kind), the screenshots they name,
// video segments in step with the events, and playback at 0.5–4× that
// walks the events at their recorded pace. It builds DOM only (no HTML
// strings: nothing in a trace is parsed as markup) and is used by the
// console (#/traces/ID, artifacts fetched with the API key) and by the
// player.html of a trace export (artifacts next to it, opened offline).

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(c instanceof Node ? c : String(c));
  return el;
}

const SPEEDS = [0.5, 1, 2, 4];
// Gaps longer than this play as this (an idle minute is not watched).
const MAX_GAP_MS = 3000;

// summary is one line about an event, from its kind's fields.
export function summary(ev) {
  const d = ev.data || {};
  switch (ev.kind) {
    case 'computer.action.started':
    case 'browser.action.started': {
      const a = d.args || {};
      const at = d.logical ? ` at ${d.logical.x},${d.logical.y}` : a.selector ? ` ${a.selector}` : '';
      const text = d.redacted ? ` (${d.text_chars || 0} characters, redacted)` : a.text ? ` "${a.text}"` : a.url ? ` ${a.url}` : '';
      return `${d.action || d.type}${at}${text}`;
    }
    case 'computer.action.finished':
    case 'browser.action.finished':
      return `${d.action || d.type} ${d.ok ? 'ok' : 'failed'} in ${d.duration_ms} ms${d.error ? `: ${d.error}` : ''}`;
    case 'computer.screenshot':
    case 'browser.screenshot': return `screenshot ${d.phase} ${d.action || d.type}${d.error ? `: ${d.error}` : ''}`;
    case 'browser.navigation': return `${d.title || ''} ${d.url || ''}`.trim();
    case 'human.input':
      if (d.type === 'type') return `typed ${d.chars} characters`;
      if (d.type === 'key') return `key ${d.key}`;
      if (d.type === 'click') return `${d.button} click${d.count > 1 ? ` ×${d.count}` : ''} at ${d.at.x},${d.at.y}`;
      if (d.type === 'drag') return `drag ${d.from.x},${d.from.y} → ${d.to.x},${d.to.y}`;
      if (d.type === 'scroll') return `scroll ${d.direction} ×${d.amount}`;
      return d.type || '';
    case 'job.started': return (d.command ? d.command.join(' ') : d.script || '').slice(0, 200);
    case 'job.finished': return `${d.state}${d.exit_code !== undefined ? `, exit ${d.exit_code}` : ''}`;
    case 'mcp.tool_call': return `${d.tool}: ${d.decision}${d.outcome ? `, ${d.outcome}` : ''}`;
    case 'control.taken': return `${d.holder} took control${d.reason ? `: ${d.reason}` : ''}`;
    case 'control.released': return `${d.previous} released control`;
    case 'control.requested': return `asks for a person${d.reason ? `: ${d.reason}` : ''}`;
    case 'action.refused': return `${d.action} refused: ${d.state}`;
    case 'annotation': return d.text || '';
    case 'task.status': return d.status || '';
    case 'video.segment': return `video ${d.index}: ${(d.duration_ms / 1000).toFixed(1)} s`;
    // An agent action let through while paused (by a step).
    case 'interrupt.stepped': return `let ${d.action || 'an agent action'} through (one step)`;
    default:
      if (!ev.kind.startsWith('interrupt.')) return '';
      return `${ev.kind.slice(10)}${d.state ? ` → ${d.state}` : ''}${d.steps ? ` (${d.steps} step${d.steps === 1 ? '' : 's'} left)` : ''}`;
  }
}

// renderPlayer fills root with the player of events. artifactURL(id, ext)
// answers (or resolves to) a URL the page may load.
export function renderPlayer(root, events, artifactURL, title = 'Trace') {
  const t0 = events.length ? Date.parse(events[0].time) : 0;
  const actors = [...new Set(events.map((e) => e.actor))].sort();
  const kinds = [...new Set(events.map((e) => e.kind))].sort();
  const segments = events.filter((e) => e.kind === 'video.segment' && e.data && e.data.artifact);
  let current = -1;
  let timer = null;
  let speed = 1;

  const actorSel = h('select', { id: 'player-actor', 'aria-label': 'Actor' }, h('option', { value: '' }, 'every actor'), actors.map((a) => h('option', { value: a }, a)));
  const kindSel = h('select', { id: 'player-kind', 'aria-label': 'Kind' }, h('option', { value: '' }, 'every kind'), kinds.map((k) => h('option', { value: k }, k)));
  const speedSel = h('select', { id: 'player-speed', 'aria-label': 'Speed' }, SPEEDS.map((s) => h('option', { value: s, selected: s === 1 }, `${s}×`)));
  const playBtn = h('button', { id: 'player-play', type: 'button' }, 'Play');
  const position = h('span', { id: 'player-position', role: 'status', 'aria-live': 'polite' }, '');
  const list = h('ol', { id: 'player-events', class: 'player-events', 'aria-label': 'Events' });
  const shot = h('img', { id: 'player-shot', alt: 'The screenshot of the selected event' });
  const mark = h('span', { class: 'player-mark', id: 'player-mark', hidden: true });
  const frame = h('div', { class: 'player-frame', hidden: true }, shot, mark);
  const shotNote = h('p', { class: 'player-note' }, 'Select an event with a screenshot to see it.');
  const video = h('video', { id: 'player-video', controls: true, muted: true, playsinline: true, hidden: segments.length === 0 });
  const detail = h('pre', { id: 'player-detail', class: 'player-detail' });

  const items = events.map((ev, i) => {
    const li = h('li', { dataset: { seq: ev.seq, actor: ev.actor, kind: ev.kind }, tabindex: '-1' },
      h('button', { type: 'button', class: 'player-item', onclick: () => select(i, true) },
        h('span', { class: 'player-t' }, `+${((Date.parse(ev.time) - t0) / 1000).toFixed(2)} s`),
        h('span', { class: `player-actor player-actor-${ev.actor.split(':')[0]}` }, ev.actor),
        h('span', { class: 'player-kind' }, ev.kind),
        h('span', { class: 'player-sum' }, summary(ev))));
    list.append(li);
    return li;
  });

  function visible(i) {
    const ev = events[i];
    return (!actorSel.value || ev.actor === actorSel.value) && (!kindSel.value || ev.kind === kindSel.value);
  }
  function filter() {
    items.forEach((li, i) => { li.hidden = !visible(i); });
    position.textContent = `${items.filter((li) => !li.hidden).length} of ${events.length} events`;
  }
  async function showShot(ev) {
    const d = ev.data || {};
    const a = d.artifact && (ev.kind.endsWith('screenshot') || ev.kind.endsWith('.finished')) ? d.artifact : null;
    if (!a || (a.mime && !a.mime.startsWith('image/'))) return;
    shot.src = await artifactURL(a.id, '.png');
    frame.hidden = false;
    // The point the action acted on, marked on the screenshot.
    mark.hidden = !(d.physical && d.size);
    if (d.physical && d.size) {
      mark.style.left = `${(100 * d.physical.x) / d.size.width}%`;
      mark.style.top = `${(100 * d.physical.y) / d.size.height}%`;
    }
    shotNote.textContent = `${ev.kind} #${ev.seq}${d.physical ? ` — acted at ${d.physical.x},${d.physical.y}` : ''}`;
  }
  // showSegment loads segment seg (if it is not loaded) at off seconds,
  // playing on if the player plays.
  async function showSegment(seg, off) {
    const url = await artifactURL(seg.data.artifact.id, '.mp4');
    if (video.dataset.segment !== String(seg.seq)) { video.src = url; video.dataset.segment = String(seg.seq); }
    const go = () => {
      video.currentTime = off;
      video.playbackRate = speed;
      if (timer) video.play().catch(() => {});
    };
    if (video.readyState >= 1) go(); else video.addEventListener('loadedmetadata', go, { once: true });
  }
  // syncVideo shows the frame of ev's time: on a user's choice always, while
  // playing only when ev is in another segment than the one playing.
  async function syncVideo(ev, byUser = true) {
    if (!segments.length) return;
    const at = Date.parse(ev.time);
    const seg = segments.find((s) => at >= Date.parse(s.data.start) && at < Date.parse(s.data.end)) || null;
    if (!seg || (!byUser && video.dataset.segment === String(seg.seq))) return;
    await showSegment(seg, (at - Date.parse(seg.data.start)) / 1000);
  }
  // A segment that ends goes on with the next one while playing.
  video.addEventListener('ended', () => {
    const i = segments.findIndex((s) => String(s.seq) === video.dataset.segment);
    if (timer && i >= 0 && i + 1 < segments.length) showSegment(segments[i + 1], 0);
  });
  function select(i, byUser) {
    if (i < 0 || i >= events.length) return;
    if (current >= 0) items[current].classList.remove('current');
    current = i;
    const li = items[i];
    li.classList.add('current');
    li.scrollIntoView({ block: 'nearest' });
    detail.textContent = JSON.stringify(events[i], null, 2);
    root.dataset.current = String(events[i].seq);
    showShot(events[i]);
    if (byUser) { stop(); syncVideo(events[i]); } else syncVideo(events[i], false);
  }
  function next(from) {
    for (let i = from + 1; i < events.length; i++) if (visible(i)) return i;
    return -1;
  }
  function stop() {
    clearTimeout(timer); timer = null;
    playBtn.textContent = 'Play';
    root.dataset.playing = 'false';
    if (!video.hidden) video.pause();
  }
  function step() {
    const n = next(current);
    if (n < 0) { stop(); return; }
    const gap = current < 0 ? 0 : Math.min(MAX_GAP_MS, Date.parse(events[n].time) - Date.parse(events[current].time));
    timer = setTimeout(() => { select(n, false); step(); }, Math.max(0, gap) / speed);
  }
  function play() {
    if (timer) { stop(); return; }
    if (next(current) < 0) current = -1;
    playBtn.textContent = 'Pause';
    root.dataset.playing = 'true';
    if (!video.hidden && video.src) { video.playbackRate = speed; video.play().catch(() => {}); }
    step();
  }
  actorSel.addEventListener('change', filter);
  kindSel.addEventListener('change', filter);
  speedSel.addEventListener('change', () => { speed = Number(speedSel.value); video.playbackRate = speed; });
  playBtn.addEventListener('click', play);
  list.addEventListener('keydown', (e) => {
    if (e.key === 'ArrowDown' || e.key === 'j') { e.preventDefault(); const n = next(current); if (n >= 0) select(n, true); }
    if (e.key === 'ArrowUp' || e.key === 'k') {
      e.preventDefault();
      for (let i = current - 1; i >= 0; i--) if (visible(i)) { select(i, true); break; }
    }
  });
  if (segments.length) {
    syncVideo(segments[0]);
  }

  root.replaceChildren(
    h('h1', {}, title),
    h('div', { class: 'player-controls' }, playBtn, h('label', {}, 'Speed ', speedSel), h('label', {}, 'Actor ', actorSel), h('label', {}, 'Kind ', kindSel), position),
    h('div', { class: 'player-body' },
      list,
      h('div', { class: 'player-media' }, video, frame, shotNote, detail)));
  root.classList.add('player');
  filter();
  return { select, play, stop };
}
