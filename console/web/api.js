// The console's one way to the server: the same APIs any client calls,
// authenticated by the session cookie; writes carry the session's CSRF
// token, which a page of another site cannot read.

let csrf = '';
let onSignedOut = () => {};

export function setCSRF(token) { csrf = token; }
export function whenSignedOut(f) { onSignedOut = f; }

export class APIError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

export async function api(path, { method = 'GET', body } = {}) {
  // X-Tributary-Console: a 401 then comes without a Basic challenge, which
  // would open the browser's password dialog instead of our sign-in form.
  const headers = { Accept: 'application/json', 'X-Tributary-Console': '1' };
  if (method !== 'GET') headers['X-CSRF-Token'] = csrf;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, { method, headers, credentials: 'same-origin', body: body === undefined ? undefined : JSON.stringify(body) });
  let data = null;
  const text = await res.text();
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (res.status === 401 && !path.startsWith('/console/session')) onSignedOut();
  if (!res.ok) throw new APIError(res.status, (data && data.error) || `${res.status} ${res.statusText}`);
  return data;
}

export const app = (p) => `/api/app/projects/${p}`;
export const imports = (p) => `${app(p)}/warehouse-sources/imports`;
export const importPath = (p, id) => `${imports(p)}/${encodeURIComponent(id)}`;
