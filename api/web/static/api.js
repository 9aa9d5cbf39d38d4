// The HTTP API, as one of two kinds of caller: with a pasted bearer token
// (kept in sessionStorage, this tab only, sent to this origin alone), or as
// a person signed in through the site's identity provider (an HttpOnly
// session cookie the page never sees; requests that change something carry
// the session's CSRF token).

const KEY = 'cardhour.token';

let csrf = '';
// setCSRF records the signed-in session's CSRF token ('' none).
export function setCSRF(v) { csrf = v || ''; }

export function token() { return sessionStorage.getItem(KEY) || ''; }
export function setToken(v) { sessionStorage.setItem(KEY, v); }
export function clearSession() {
  for (const k of Object.keys(sessionStorage)) if (k.startsWith('cardhour.')) sessionStorage.removeItem(k);
}

// ApiError carries the problem details of a failed request.
export class ApiError extends Error {
  constructor(status, problem, requestId) {
    super(problem?.detail || problem?.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
    // The request's ID (the problem's request_id, or the X-Request-ID
    // header), for the administrator's logs.
    this.requestId = problem?.request_id || requestId || '';
  }
}

async function problemOf(res) {
  try {
    return await res.json();
  } catch {
    return { title: res.statusText };
  }
}

// request sends one request; a 401 ends the session (the token expired or
// was revoked) through the onUnauthorized hook.
let onUnauthorized = () => {};
export function setUnauthorizedHook(f) { onUnauthorized = f; }

export async function request(method, path, { body, query, contentType, raw, tokenOverride } = {}) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== '') url.searchParams.set(k, Array.isArray(v) ? v.join(',') : v);
  }
  const secret = tokenOverride ?? token();
  const headers = { Accept: 'application/json' };
  if (secret) headers.Authorization = 'Bearer ' + secret;
  else if (csrf && method !== 'GET' && method !== 'HEAD') headers['X-CSRF-Token'] = csrf;
  let payload;
  if (body !== undefined) {
    headers['Content-Type'] = contentType || 'application/json';
    payload = typeof body === 'string' ? body : JSON.stringify(body);
  }
  const res = await fetch(url, { method, headers, body: payload, cache: 'no-store', credentials: 'same-origin' });
  if (!res.ok) {
    const p = await problemOf(res);
    if (res.status === 401 && tokenOverride === undefined) onUnauthorized();
    throw new ApiError(res.status, p, res.headers.get('X-Request-ID'));
  }
  return raw ? res : res.json();
}

export const get = (path, query) => request('GET', path, { query });
export const post = (path, body) => request('POST', path, { body });

// getAll follows next_cursor to the end (pages of limit rows).
export async function getAll(path, query = {}, limit = 1000) {
  let cursor = '';
  let first;
  const items = [];
  do {
    const page = await get(path, { ...query, limit, cursor });
    first ??= page;
    items.push(...(page.items || page.rows || []));
    cursor = page.next_cursor || '';
  } while (cursor);
  return { ...first, items, rows: items };
}

// download fetches a file with the token and saves it under the name the
// server gives in Content-Disposition.
export async function download(path, query) {
  const res = await request('GET', path, { query, raw: true });
  const cd = res.headers.get('Content-Disposition') || '';
  const m = /filename="?([^";]+)"?/.exec(cd);
  const name = m ? m[1] : 'download';
  const blob = await res.blob();
  const href = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = href;
  a.download = name;
  a.hidden = true;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(href), 10000);
  return name;
}
