import { h, replace, table, badge, note, fmtTime } from '../dom.js';
import { get } from '../api.js';
import { readMetrics, histogram, samples } from '../metrics.js';

const STATE_ORDER = ['starting', 'ready', 'idle', 'leased', 'busy', 'draining', 'failed', 'created'];

export async function systemView(root) {
  const [caps, health, ready, metrics] = await Promise.all([
    get('/v1/capabilities'),
    fetch('/healthz', { cache: 'no-store' }).then((r) => r.json()).catch(() => ({ status: 'unreachable' })),
    fetch('/readyz', { cache: 'no-store' }).then((r) => r.json()).catch(() => ({ status: 'unreachable' })),
    readMetrics().catch(() => []),
  ]);
  const runtimes = (caps.runtimes || []).map((r) => h('tr', {}, h('td', {}, r.name), h('td', {}, badge(r.healthy === false ? 'unhealthy' : 'healthy', r.healthy === false ? 'failed' : 'ready')), h('td', {}, r.version || ''), h('td', {}, r.error || '')));
  const profiles = (caps.profiles || []).map((p) => h('tr', {}, h('td', {}, p.name), h('td', {}, badge(p.image_status.replace('_', ' '), IMAGE_BADGE[p.image_status] || 'failed')),
    h('td', {}, (p.usable_runtimes || []).join(', ')), h('td', {}, p.network), h('td', {}, p.description || '')));
  const stateChart = h('div', { id: 'chart-states' });
  const draw = () => replace(stateChart, statesChart(samples));
  draw();
  const timer = setInterval(draw, 5000);
  const imageList = imagesSection();
  replace(root,
    h('h1', {}, 'System'),
    h('section', { 'aria-labelledby': 'health-title' }, h('h2', { id: 'health-title' }, 'Health'),
      h('p', {}, 'Alive ', badge(health.status, health.status === 'ok' ? 'ready' : 'failed'), ' · Ready ', badge(ready.status, ready.status === 'ok' ? 'ready' : 'failed'),
        ' ', Object.entries(ready.checks || {}).map(([k, v]) => `${k}: ${v}`).join(' · ')),
      h('p', { class: 'muted' }, `Driver ${caps.driver} · daemon ${caps.daemon_version || '?'} (API ${caps.api_version || '?'}) · kernel ${caps.kernel_version || '?'} · cgroup ${caps.cgroup_version || '?'} · probed ${fmtTime(caps.checked_at)}`),
      caps.error ? note(caps.error, 'error') : null),
    h('section', { 'aria-labelledby': 'charts-title' }, h('h2', { id: 'charts-title' }, 'Charts'),
      h('div', { class: 'charts' },
        h('figure', {}, h('figcaption', {}, 'Sandboxes by state (all tenants), sampled every 5 s since this console opened'), stateChart),
        h('figure', {}, h('figcaption', {}, 'Exec latency (synchronous execs), by runtime'), histChart(histogram(metrics, 'genesis_exec_duration_seconds', 'runtime'))),
        h('figure', {}, h('figcaption', {}, 'Lease wait (request to grant), by runtime'), histChart(histogram(metrics, 'genesis_lease_wait_seconds', 'runtime'))))),
    imageList.el,
    h('section', {}, h('h2', {}, 'Runtimes'), table('Runtimes', ['Runtime', 'Health', 'Version', 'Error'], runtimes)),
    h('section', {}, h('h2', {}, 'Profiles'), table('Profiles', ['Profile', 'Image', 'Usable runtimes', 'Network', 'Description'], profiles)),
    h('section', {}, h('h2', {}, 'Risk policy'), h('ul', {}, Object.entries(caps.risk_policy || {}).sort(([a], [b]) => riskRank(a) - riskRank(b) || a.localeCompare(b))
      .map(([k, v]) => h('li', {}, `${k}: ${v.join(', ') || 'none on this host'}`)))));
  return () => { clearInterval(timer); imageList.stop(); };
}

// IMAGE_BADGE is the badge class of an image status.
const IMAGE_BADGE = { present: 'ready', building: 'starting', queued: 'pending', failed: 'failed', not_built: 'warn' };

// imageProgress says where an image stands, for its row: the percentage
// of a build under way (null otherwise), one line of text and a detail.
export function imageProgress(im) {
  const b = im.build;
  switch (im.status) {
    case 'present': return { percent: null, text: 'ready', detail: '' };
    case 'queued': return { percent: null, text: 'waiting for the builds before it', detail: '' };
    case 'building':
      if (!b) return { percent: null, text: 'building', detail: '' };
      if (b.state === 'waiting') return { percent: b.percent, text: 'waiting', detail: b.detail || '' };
      return { percent: b.percent, text: b.summary.replace(/^building /, ''), detail: b.detail || '' };
    case 'failed': return { percent: null, text: 'the build failed', detail: ((b && b.error) || '').split('\n')[0] };
    default: return { percent: null, text: 'not built', detail: im.build_command || '' };
  }
}

// imagesSection lists the profiles' images with the progress of the
// service's background builds, asking again every 2 s while one runs.
function imagesSection() {
  const body = h('div', { id: 'images' }, h('p', { class: 'muted' }, 'Loading…'));
  let timer = null, stopped = false;
  const row = (im) => {
    const p = imageProgress(im);
    return h('tr', { 'data-image': im.name },
      h('td', {}, im.name),
      h('td', {}, badge(im.status.replace('_', ' '), IMAGE_BADGE[im.status] || '')),
      h('td', {},
        p.percent == null ? null : h('progress', { max: 100, value: p.percent, 'aria-label': `${im.name}: ${p.percent}%` }),
        p.percent == null ? null : ' ',
        p.text,
        p.detail ? h('div', { class: 'muted' }, p.detail) : null),
      h('td', {}, (im.profiles || []).join(', ')));
  };
  const render = async () => {
    let items;
    try {
      items = (await get('/v1/images')).items || [];
    } catch (e) {
      if (!stopped) replace(body, note(e.message, 'error'));
      return;
    }
    if (stopped) return;
    replace(body, table('Images', ['Image', 'Status', 'Progress', 'Profiles'], items.map(row)));
    if (items.some((im) => im.status === 'queued' || im.status === 'building')) timer = setTimeout(render, 2000);
  };
  render();
  return {
    el: h('section', { 'aria-labelledby': 'images-title' }, h('h2', { id: 'images-title' }, 'Images'),
      h('p', { class: 'muted' }, 'The images the profiles run. Missing ones are built in the background, one after another, when the service runs with --build-images (make run does).'),
      body),
    stop: () => { stopped = true; clearTimeout(timer); },
  };
}

// Risk levels from most to least trusted; unknown ones after.
const RISK_LEVELS = ['trusted', 'low', 'medium', 'high', 'untrusted'];
const riskRank = (level) => { const i = RISK_LEVELS.indexOf(level); return i < 0 ? RISK_LEVELS.length : i; };

const W = 480, H = 180, P = 28;

function svg(label, ...kids) {
  return h('svg:svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': label, class: 'chart' }, kids);
}

// statesChart draws one line per state over the samples.
function statesChart(data) {
  if (data.length < 2) return h('p', { class: 'muted' }, 'Collecting samples… (one every 5 s)');
  const states = STATE_ORDER.filter((s) => data.some((d) => d.by[s]));
  const max = Math.max(1, ...data.flatMap((d) => states.map((s) => d.by[s] || 0)));
  const t0 = data[0].t, t1 = data[data.length - 1].t;
  const x = (t) => P + ((W - 2 * P) * (t - t0)) / Math.max(1, t1 - t0);
  const y = (v) => H - P - ((H - 2 * P) * v) / max;
  const last = data[data.length - 1].by;
  return h('div', {},
    svg(`Sandboxes by state: ${states.map((s) => `${s} ${last[s] || 0}`).join(', ')}`,
      h('svg:line', { x1: P, y1: H - P, x2: W - P, y2: H - P, class: 'axis' }),
      h('svg:text', { x: 2, y: P, class: 'tick' }, String(max)), h('svg:text', { x: 2, y: H - P, class: 'tick' }, '0'),
      states.map((s, i) => h('svg:polyline', { class: `series s${i}`, fill: 'none', points: data.map((d) => `${x(d.t).toFixed(1)},${y(d.by[s] || 0).toFixed(1)}`).join(' ') }))),
    h('ul', { class: 'legend' }, states.map((s, i) => h('li', {}, h('span', { class: `swatch s${i}` }), ` ${s} ${last[s] || 0}`))));
}

// histChart draws grouped bars of a histogram's buckets per runtime.
function histChart(series) {
  const names = Object.keys(series).sort();
  const total = names.reduce((n, k) => n + series[k].reduce((a, b) => a + b.count, 0), 0);
  if (!total) return h('p', { class: 'muted' }, 'No observations yet.');
  const buckets = series[names[0]].map((b) => b.le);
  const max = Math.max(1, ...names.flatMap((k) => series[k].map((b) => b.count)));
  const bw = (W - 2 * P) / buckets.length;
  const label = (le) => (le === Infinity ? '+∞' : le < 1 ? `${Math.round(le * 1000)}ms` : `${le}s`);
  return h('div', {},
    svg(`Histogram: ${names.map((k) => `${k} ${series[k].reduce((a, b) => a + b.count, 0)} observations`).join(', ')}`,
      h('svg:line', { x1: P, y1: H - P, x2: W - P, y2: H - P, class: 'axis' }),
      names.map((k, j) => series[k].map((b, i) => {
        const bh = ((H - 2 * P) * b.count) / max;
        return h('svg:rect', { class: `series-fill s${j}`, x: (P + i * bw + (j * bw) / names.length + 1).toFixed(1), y: (H - P - bh).toFixed(1), width: Math.max(1, bw / names.length - 2).toFixed(1), height: bh.toFixed(1) },
          h('svg:title', {}, `${k} ≤ ${label(b.le)}: ${b.count}`));
      })),
      buckets.map((le, i) => (i % 2 ? null : h('svg:text', { x: (P + i * bw).toFixed(1), y: H - 8, class: 'tick' }, label(le))))),
    h('ul', { class: 'legend' }, names.map((k, j) => h('li', {}, h('span', { class: `swatch s${j}` }), ` ${k}`))));
}
