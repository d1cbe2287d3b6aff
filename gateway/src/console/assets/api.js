// The console's requests to the gateway: the token of this tab (kept in
// sessionStorage, never anywhere else), JSON answers, and Placement's error
// bodies turned into messages.

const TOKEN_KEY = 'keelson-console-token';
// The page is served at <prefix>/keelson/console/; its data is beside it.
const DATA = new URL('../v1/', document.baseURI);

let strategy = null;

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** How this gateway authenticates: 'noauth2' or 'keystone'. */
export async function authStrategy() {
  if (strategy === null) {
    const doc = await request('GET', 'console/session', {anonymous: true});
    strategy = doc.auth_strategy;
  }
  return strategy;
}

export function token() {
  if (strategy === 'noauth2') return 'admin';
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  sessionStorage.setItem(TOKEN_KEY, value);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
}

function message(status, text) {
  try {
    const doc = JSON.parse(text);
    const e = doc.errors && doc.errors[0];
    if (e) return `${e.status} ${e.title}: ${String(e.detail || '').trim()}`;
    if (doc.error && doc.error.message) return `${status}: ${doc.error.message}`;
    if (doc.message) return `${status}: ${String(doc.message).replace(/<br \/>/g, ' ').trim()}`;
  } catch (_) {
    // not JSON: the status alone
  }
  return `the gateway answered ${status}`;
}

/**
 * One request under /keelson/v1/: `path` relative to it, `query` an object
 * or URLSearchParams, `body` sent as JSON.
 */
export async function request(method, path, {query, body, headers, anonymous} = {}) {
  const url = new URL(path, DATA);
  if (query) {
    const params = query instanceof URLSearchParams ? query : new URLSearchParams(query);
    url.search = params.toString();
  }
  const h = Object.assign({accept: 'application/json'}, headers || {});
  if (!anonymous) {
    const t = token();
    if (!t) throw new ApiError(401, 'not logged in');
    h['x-auth-token'] = t;
  }
  const init = {method, headers: h, cache: 'no-store', credentials: 'omit'};
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    h['content-type'] = 'application/json';
  }
  const resp = await fetch(url, init);
  const text = await resp.text();
  if (!resp.ok) {
    if (resp.status === 401 && !anonymous) {
      clearToken();
      window.dispatchEvent(new CustomEvent('keelson-unauthorized'));
    }
    throw new ApiError(resp.status, message(resp.status, text));
  }
  return text ? JSON.parse(text) : null;
}

export function get(path, query, headers) {
  return request('GET', path, {query, headers});
}

/** Exchanges a password for a token (Keystone mode). */
export async function login(credentials) {
  const doc = await request('POST', 'console/login', {body: credentials, anonymous: true});
  setToken(doc.token);
  return doc;
}
