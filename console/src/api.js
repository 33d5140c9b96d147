// api.js: the only place that talks to the service. The API key lives in
// sessionStorage (this tab only, gone when it closes), travels only in the
// Authorization header, and never goes into a URL or a cookie.

const KEY = 'genesis.apiKey';
const ADMIN = 'genesis.admin';
const TENANT = 'genesis.tenant';
const ACT_AS = 'genesis.actAs';

export const session = {
  get key() { return sessionStorage.getItem(KEY) || ''; },
  get admin() { return sessionStorage.getItem(ADMIN) === '1'; },
  get tenant() { return sessionStorage.getItem(TENANT) || ''; },
  // actAs is the tenant an admin acts for (X-Genesis-Tenant on every
  // call): the console then shows that tenant's sandboxes as its own key
  // would. Empty: the key's own tenant.
  get actAs() { return this.admin ? sessionStorage.getItem(ACT_AS) || '' : ''; },
  setActAs(t) { if (t && t !== this.tenant) sessionStorage.setItem(ACT_AS, t); else sessionStorage.removeItem(ACT_AS); },
  // owner is the tenant whose resources the console shows.
  get owner() { return this.actAs || this.tenant; },
  set(key, admin, tenant) { sessionStorage.setItem(KEY, key); sessionStorage.setItem(ADMIN, admin ? '1' : '0'); sessionStorage.setItem(TENANT, tenant || ''); sessionStorage.removeItem(ACT_AS); },
  clear() { for (const k of [KEY, ADMIN, TENANT, ACT_AS]) sessionStorage.removeItem(k); },
};

// ApiError is a problem+json answer (or a network failure, status 0).
export class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.code = (problem && problem.code) || '';
    this.problem = problem || {};
  }
}

let onUnauthenticated = () => {};
export function whenSignedOut(fn) { onUnauthenticated = fn; }

// request sends one API call. opts: query (object; arrays repeat), body
// (JSON), raw (a Blob/ArrayBuffer sent as is), key (overrides the session's),
// signal, as ('json' | 'blob' | 'response').
export async function request(method, path, opts = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(opts.query || {})) {
    for (const x of [].concat(v)) if (x !== undefined && x !== null && x !== '') url.searchParams.append(k, x);
  }
  const headers = { Accept: 'application/json, application/problem+json' };
  const key = opts.key ?? session.key;
  if (key) headers.Authorization = `Bearer ${key}`;
  if (opts.key === undefined && session.actAs) headers['X-Genesis-Tenant'] = session.actAs;
  let body;
  if (opts.body !== undefined) { headers['Content-Type'] = 'application/json'; body = JSON.stringify(opts.body); }
  if (opts.raw !== undefined) { headers['Content-Type'] = 'application/octet-stream'; body = opts.raw; }
  Object.assign(headers, opts.headers || {});
  let resp;
  try {
    resp = await fetch(url, { method, headers, body, signal: opts.signal, credentials: 'omit', cache: 'no-store' });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, { detail: `The service did not answer: ${e.message}` });
  }
  if (!resp.ok) {
    let problem = null;
    try { problem = await resp.json(); } catch { /* not JSON */ }
    const err = new ApiError(resp.status, problem);
    if (resp.status === 401 && opts.key === undefined) onUnauthenticated(err);
    throw err;
  }
  if (opts.as === 'response') return resp;
  if (opts.as === 'blob') return resp.blob();
  if (resp.status === 204) return null;
  const text = await resp.text();
  return text ? JSON.parse(text) : null;
}

export const get = (path, query, opts = {}) => request('GET', path, { ...opts, query });
export const post = (path, body, opts = {}) => request('POST', path, { ...opts, body });
export const del = (path, opts = {}) => request('DELETE', path, opts);

export const enc = encodeURIComponent;
