// metrics.js: reads the service's own /metrics (Prometheus text) for the
// charts; a sampler keeps sandboxes-by-state every 5 s while the console
// is open (no external Prometheus needed).

export async function readMetrics() {
  const resp = await fetch('/metrics', { cache: 'no-store', credentials: 'omit' });
  if (!resp.ok) throw new Error(`/metrics answered ${resp.status}`);
  return parseMetrics(await resp.text());
}

// parseMetrics returns [{name, labels, value}] of the sample lines.
export function parseMetrics(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const m = line.match(/^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] || '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2].replace(/\\(.)/g, '$1');
    out.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return out;
}

// histogram gives, per label value of `by`, the bucket counts (not
// cumulative) of a Prometheus histogram.
export function histogram(samples, name, by) {
  const series = {};
  for (const s of samples) {
    if (s.name !== name + '_bucket') continue;
    const k = s.labels[by] || '';
    (series[k] ||= []).push({ le: s.labels.le === '+Inf' ? Infinity : Number(s.labels.le), cum: s.value });
  }
  for (const k of Object.keys(series)) {
    const b = series[k].sort((a, c) => a.le - c.le);
    series[k] = b.map((x, i) => ({ le: x.le, count: x.cum - (i ? b[i - 1].cum : 0) }));
  }
  return series;
}

export const samples = [];
let timer = null;

async function sample() {
  try {
    const m = await readMetrics();
    const by = {};
    for (const s of m) if (s.name === 'genesis_sandboxes') by[s.labels.state] = s.value;
    samples.push({ t: Date.now(), by });
    if (samples.length > 720) samples.shift();
  } catch { /* the service is away; try at the next tick */ }
}

export function startSampler() {
  if (timer) return;
  sample();
  timer = setInterval(sample, 5000);
}
