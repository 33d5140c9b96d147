// jobstore.js: the jobs this tab started in each sandbox (the API has no
// per-sandbox job list yet), kept in sessionStorage.
const K = 'genesis.jobs';

export function jobsOf(sandboxID) {
  try { return (JSON.parse(sessionStorage.getItem(K) || '{}')[sandboxID]) || []; } catch { return []; }
}

export function rememberJob(sandboxID, job) {
  let all = {};
  try { all = JSON.parse(sessionStorage.getItem(K) || '{}'); } catch { /* reset */ }
  const list = (all[sandboxID] || []).filter((j) => j.id !== job.id);
  list.unshift({ id: job.id, what: job.what, at: new Date().toISOString() });
  all[sandboxID] = list.slice(0, 50);
  sessionStorage.setItem(K, JSON.stringify(all));
}
