// The console's shell: sign-in, the project picker, the hash router and
// the polling that live pages use. Pages live in their own modules.
import { h } from './dom.js';
import { api, setCSRF, whenSignedOut, APIError } from './api.js';
import { importsPage, importPage } from './imports.js';
import { runPage } from './run.js';
import { overviewPage } from './overview.js';
import { migrationsPage } from './migrations.js';

const main = document.getElementById('main');
const statusEl = document.getElementById('status');
let session = null;
let timer = 0; // the current page's poll, cleared on every navigation
let renderSeq = 0;

// ctx is what a page gets: its project, what the account may do, and
// helpers to poll and to say something to screen readers.
function context(project, seq) {
  return {
    project,
    canWrite: project.can_write,
    say(msg) { statusEl.textContent = msg; },
    // poll calls f every ms until it returns false or the page changes.
    poll(f, ms) {
      clearTimeout(timer);
      const tick = async () => {
        if (seq !== renderSeq) return;
        let again = false;
        try { again = await f(); } catch (e) { again = !(e instanceof APIError && e.status === 401); }
        if (again && seq === renderSeq) timer = setTimeout(tick, ms);
      };
      timer = setTimeout(tick, ms);
    },
    current: () => seq === renderSeq,
    // reload renders the page again, keeping focus on the same control.
    reload: () => render(document.activeElement?.id),
  };
}

function signInForm(message) {
  document.getElementById('nav').hidden = true;
  document.getElementById('signout').hidden = true;
  document.getElementById('who').textContent = '';
  const err = h('p', { id: 'signin-error', role: 'alert', class: 'error' }, message || '');
  const form = h('form', { class: 'signin', 'aria-describedby': 'signin-help' },
    h('h1', {}, 'Sign in'),
    h('p', { id: 'signin-help' }, 'Use a service account of your project: its username and secret, as for the app API.'),
    h('label', { for: 'username' }, 'Username'),
    h('input', { id: 'username', name: 'username', autocomplete: 'username', required: true }),
    h('label', { for: 'secret' }, 'Secret'),
    h('input', { id: 'secret', name: 'secret', type: 'password', autocomplete: 'current-password', required: true }),
    h('button', { type: 'submit' }, 'Sign in'),
    err);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    err.textContent = '';
    try {
      const s = await api('/console/session', { method: 'POST', body: { username: form.username.value, secret: form.secret.value } });
      signedIn(s);
    } catch (e) {
      err.textContent = e.status === 401 ? 'Wrong username or secret.' : `Sign-in failed: ${e.message}`;
      form.secret.focus();
    }
  });
  main.replaceChildren(form);
  form.username.focus();
}

function signedIn(s) {
  session = s;
  setCSRF(s.csrf_token);
  document.getElementById('who').textContent = s.account;
  document.getElementById('signout').hidden = false;
  const sel = document.getElementById('project');
  sel.replaceChildren(...s.projects.map((p) => h('option', { value: p.id }, `${p.name} (${p.id}) · ${p.role}`)));
  document.getElementById('nav').hidden = false;
  if (!location.hash || location.hash === '#' || location.hash === '#/') location.hash = s.projects.length ? `#/p/${s.projects[0].id}/imports` : '#/none';
  else render();
}

// route parses #/p/{project}/{page}[/{id}[/runs/{run}]].
function route() {
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  if (parts[0] !== 'p') return { page: parts[0] || '' };
  return { project: Number(parts[1]), page: parts[2] || 'imports', id: parts[3], run: parts[4] === 'runs' ? parts[5] : undefined };
}

async function render(focusID) {
  if (!session) return;
  const seq = ++renderSeq;
  clearTimeout(timer);
  if (typeof focusID !== 'string') statusEl.textContent = '';
  const r = route();
  const project = session.projects.find((p) => p.id === r.project) || session.projects[0];
  if (!project) {
    main.replaceChildren(h('h1', {}, 'No projects'), h('p', {}, 'This account belongs to no project served here.'));
    return;
  }
  if (project.id !== r.project) { location.hash = `#/p/${project.id}/imports`; return; }
  document.getElementById('project').value = String(project.id);
  for (const a of document.querySelectorAll('#nav a')) {
    a.href = `#/p/${project.id}/${a.dataset.page}`;
    if (a.dataset.page === r.page) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  const ctx = context(project, seq);
  let node;
  try {
    if (r.page === 'imports' && r.id && r.run) node = await runPage(ctx, r.id, r.run);
    else if (r.page === 'imports' && r.id) node = await importPage(ctx, r.id);
    else if (r.page === 'imports') node = await importsPage(ctx);
    else if (r.page === 'overview') node = await overviewPage(ctx);
    else if (r.page === 'migrations') node = await migrationsPage(ctx);
    else node = h('div', {}, h('h1', {}, 'Not found'), h('p', {}, 'No such page.'));
  } catch (e) {
    if (e instanceof APIError && e.status === 401) return;
    node = h('div', {}, h('h1', {}, 'Something went wrong'), h('p', { role: 'alert', class: 'error' }, e.message));
  }
  if (seq !== renderSeq) return;
  main.replaceChildren(node);
  document.title = `${main.querySelector('h1')?.textContent || 'Console'} · Tributary`;
  const keep = typeof focusID === 'string' && focusID && document.getElementById(focusID);
  (keep || main).focus({ preventScroll: true });
}

whenSignedOut(() => {
  session = null;
  ++renderSeq;
  clearTimeout(timer);
  signInForm('Your session has ended. Sign in again.');
});

document.getElementById('signout').addEventListener('click', async () => {
  try { await api('/console/session', { method: 'DELETE' }); } catch { /* signed out anyway */ }
  session = null;
  setCSRF('');
  signInForm('Signed out.');
});
document.getElementById('project').addEventListener('change', (ev) => { location.hash = `#/p/${ev.target.value}/imports`; });
window.addEventListener('hashchange', () => render());

(async () => {
  try { signedIn(await api('/console/session')); } catch { signInForm(); }
})();
