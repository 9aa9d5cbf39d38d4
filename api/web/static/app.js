// The dashboard's entry: sign-in with an API token, role-aware navigation
// and a hash router (#/now, #/usage, #/invoices, #/invoices/ID, #/statements, #/statements/ID, #/runs,
// #/roster, #/alerts, #/releases, #/exemptions, #/budgets). Each page reads only what the role may read.

import { ApiError, clearSession, get, request, setCSRF, setToken, setUnauthorizedHook, token } from './api.js';
import { errorText, h, setZone } from './format.js';
import { getLang, pickLang, setLang, t } from './i18n.js';
import { leave as leavePages, pages } from './pages.js';
import { reviewPages } from './review.js';
import { watchPages } from './watch.js';

const STAFF = ['admin', 'finance', 'lead'];
const FINANCE = ['admin', 'finance'];

// routes: name → the roles that see it (the API's role sets).
const routes = [
  { name: 'now', roles: ['admin', 'finance', 'lead', 'student'] },
  { name: 'usage', roles: ['admin', 'finance', 'lead', 'student'] },
  { name: 'efficiency', roles: FINANCE },
  { name: 'invoices', roles: STAFF },
  { name: 'statements', roles: ['student'] },
  { name: 'runs', roles: FINANCE },
  { name: 'roster', roles: STAFF },
  { name: 'alerts', roles: ['admin', 'finance', 'lead', 'student'] },
  { name: 'releases', roles: ['admin', 'finance', 'lead', 'student'] },
  { name: 'exemptions', roles: ['admin', 'finance', 'lead', 'student'] },
  { name: 'budgets', roles: ['admin', 'finance', 'lead', 'student'] },
  { name: 'review', roles: STAFF },
];
// The usage page's module (with its charts) is loaded when it is first
// opened: the other pages do not wait for it.
let usageModule;
let efficiencyModule;
const usagePages = {
  usage: async (ctx) => {
    usageModule ??= await import('./usage.js');
    return usageModule.usagePages.usage(ctx);
  },
  efficiency: async (ctx) => {
    efficiencyModule ??= await import('./efficiency.js');
    return efficiencyModule.efficiencyPage(ctx);
  },
};
const allPages = { ...pages, ...usagePages, ...watchPages, ...reviewPages };

// leave releases what a page holds (the usage page's charts, the Now page's
// polling) before the next one.
function leave() { usageModule?.leave(); efficiencyModule?.leave(); leavePages(); }

const main = document.getElementById('main');
const statusEl = document.getElementById('status');

export function say(msg) { statusEl.textContent = msg; }

function me() {
  try { return JSON.parse(sessionStorage.getItem('cardhour.me') || 'null'); } catch { return null; }
}

// signedIn is the session of a person signed in through the identity
// provider (GET /auth/session), null when there is none.
let signedIn = null;

function session() {
  const m = me();
  const currency = sessionStorage.getItem('cardhour.currency') || '';
  const tz = sessionStorage.getItem('cardhour.tz') || '';
  if (m && token()) return { me: m, currency, tz };
  if (!signedIn) return null;
  const g = signedIn.grants[signedIn.active] || {};
  return { me: { role: g.role, project: g.project, user: g.user, name: signedIn.name || signedIn.person }, person: signedIn, currency, tz };
}

// loadSession asks the server for the cookie's session; a 401 is no session.
async function loadSession() {
  try {
    const res = await fetch('/auth/session', { credentials: 'same-origin', cache: 'no-store', headers: { Accept: 'application/json' } });
    signedIn = res.ok ? await res.json() : null;
  } catch {
    signedIn = null;
  }
  setCSRF(signedIn ? signedIn.csrf_token : '');
  if (signedIn) await learnZone();
}

function grantLabel(g) {
  return [t('role.' + g.role), g.project].filter(Boolean).join(' · ');
}

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [p, q = ''] = raw.split('?');
  const parts = p.split('/').filter(Boolean);
  return { name: parts[0] || 'now', rest: parts.slice(1), params: new URLSearchParams(q) };
}

// go changes the route (and so renders).
export function go(name, params, rest = []) {
  const q = params ? new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== '')).toString() : '';
  const hash = '#/' + [name, ...rest].join('/') + (q ? '?' + q : '');
  if (location.hash === hash) render();
  else location.hash = hash;
}

function renderChrome() {
  document.getElementById('skip-link').textContent = t('skip');
  document.getElementById('lang-label').textContent = t('language');
  document.getElementById('lang').value = getLang();
  const logout = document.getElementById('logout');
  logout.textContent = t('logout');
  const nav = document.getElementById('nav');
  const who = document.getElementById('who');
  const s = session();
  nav.replaceChildren();
  who.textContent = '';
  logout.hidden = !s;
  if (!s) return;
  const cur = parseHash().name;
  const list = h('ul', {}, routes.filter((r) => r.roles.includes(s.me.role)).map((r) =>
    h('li', {}, h('a', { href: '#/' + r.name, 'aria-current': r.name === cur ? 'page' : undefined }, t('nav.' + r.name)))));
  nav.append(list);
  const subject = [s.me.project, s.me.user].filter(Boolean).join(' / ') || s.me.name || '';
  who.textContent = `${t('role.' + s.me.role)}${subject ? ' · ' + subject : ''}`;
  if (s.person) {
    who.textContent = `${s.person.name || s.person.person} · `;
    who.title = s.person.person;
    if (s.person.grants.length > 1) {
      const sel = h('select', { id: 'grant', 'aria-label': t('signin.grant') },
        s.person.grants.map((g, i) => h('option', { value: String(i), selected: i === s.person.active ? 'selected' : undefined }, grantLabel(g))));
      sel.addEventListener('change', () => switchGrant(Number(sel.value)));
      who.append(sel);
    } else {
      who.append(grantLabel(s.person.grants[0]));
    }
  }
}

// switchGrant makes another of the person's grants the active one.
async function switchGrant(i) {
  try {
    signedIn = await request('POST', '/auth/session/active', { body: { grant: i } });
    setCSRF(signedIn.csrf_token);
    history.replaceState(null, '', '#/now');
    render();
  } catch (e) {
    say(errorText(e));
  }
}

// providerButtons are the sign-in ways the server offers (GET
// /auth/providers): "Sign in with …" links, the LDAP form, the demo's people.
async function providerButtons() {
  let p = {};
  try {
    const res = await fetch('/auth/providers', { cache: 'no-store' });
    if (res.ok) p = await res.json();
  } catch { /* tokens only */ }
  const ret = encodeURIComponent('/ui/' + location.hash);
  const out = [];
  if (p.oidc) out.push(h('a', { class: 'button-link', id: 'signin-oidc', href: '/auth/login?return=' + ret }, t('signin.with', { name: p.oidc })));
  if (p.cas) out.push(h('a', { class: 'button-link', id: 'signin-cas', href: '/auth/cas/login?return=' + ret }, t('signin.with', { name: p.cas })));
  if (p.ldap) {
    out.push(h('form', { class: 'ldap', id: 'ldap-form', method: 'post', action: '/auth/ldap' },
      h('h2', {}, t('signin.with', { name: p.ldap })),
      h('label', { for: 'ldap-user' }, t('signin.user')),
      h('input', { id: 'ldap-user', name: 'user', autocomplete: 'username', required: true, spellcheck: 'false' }),
      h('label', { for: 'ldap-password' }, t('signin.password')),
      h('input', { id: 'ldap-password', name: 'password', type: 'password', autocomplete: 'current-password', required: true }),
      h('input', { type: 'hidden', name: 'return', value: '/ui/' + location.hash }),
      h('button', { type: 'submit', id: 'ldap-submit' }, t('login.submit'))));
  }
  if (p.demo && p.demo.length) {
    out.push(h('div', { class: 'demo-people', id: 'signin-demo' },
      h('p', { class: 'muted' }, t('signin.demo')),
      ...p.demo.map((label, i) => h('a', { class: 'button-link secondary', href: '/auth/demo?as=' + i, 'data-demo': String(i) }, label))));
  }
  return out;
}

function loginPage(error) {
  const input = h('input', { id: 'token', name: 'token', type: 'password', autocomplete: 'off', required: true, spellcheck: 'false', size: 48 });
  const err = h('p', { class: 'error', id: 'login-error', role: 'alert' }, error || '');
  const title = h('h1', {}, t('login.title'));
  const form = h('form', { class: 'card login', id: 'login-form', 'aria-describedby': 'login-help' },
    title,
    h('p', { id: 'login-help' }, t('login.help')),
    h('label', { for: 'token' }, t('login.token')), input,
    h('button', { type: 'submit', id: 'login-submit' }, t('login.submit')),
    err);
  providerButtons().then((ways) => {
    if (!ways.length || !form.isConnected) return;
    title.textContent = t('signin.token');
    form.querySelector('#login-help').textContent = t('signin.tokenHelp');
    main.prepend(h('section', { class: 'card login signin-ways', id: 'signin-ways' }, h('h1', {}, t('login.title')), ...ways));
  });
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const secret = input.value.trim();
    if (!secret) return;
    err.textContent = t('loading');
    try {
      await signIn(secret);
      render();
    } catch (e) {
      err.textContent = t('login.bad', { detail: e.message });
      input.focus();
    }
  });
  main.replaceChildren(form);
  input.focus();
}

// signIn checks the token (/me) and learns the catalog's time zone and
// currency from an empty usage report (every role may read its own usage).
async function signIn(secret) {
  const who = await request('GET', '/api/v1/me', { tokenOverride: secret });
  setToken(secret);
  sessionStorage.setItem('cardhour.me', JSON.stringify(who));
  await learnZone();
}

// learnZone learns the catalog's time zone and currency from an empty
// usage report (every role may read its own usage).
async function learnZone() {
  const to = new Date();
  const from = new Date(to.getTime() - 60000);
  try {
    const rep = await get('/api/v1/usage', { from: from.toISOString(), to: to.toISOString() });
    sessionStorage.setItem('cardhour.tz', rep.timezone || '');
    sessionStorage.setItem('cardhour.currency', rep.currency || '');
  } catch (e) {
    if (!(e instanceof ApiError) || e.status === 401) throw e;
    // No usage store: times in the browser's zone, money without a symbol.
  }
}

let renderSeq = 0;

export async function render() {
  const seq = ++renderSeq;
  const s = session();
  renderChrome();
  if (!s) {
    document.title = 'cardhour';
    loginPage();
    return;
  }
  setZone(s.tz);
  const route = parseHash();
  let r = routes.find((x) => x.name === route.name && x.roles.includes(s.me.role));
  if (!r) {
    r = routes[0];
    history.replaceState(null, '', '#/now');
    route.name = 'now';
    renderChrome();
  }
  document.title = `${t('nav.' + r.name)} · cardhour`;
  leave();
  const view = h('div', { class: 'page', id: 'page-' + r.name, 'aria-busy': 'true' }, h('p', {}, t('loading')));
  main.replaceChildren(view);
  try {
    await allPages[r.name]({ view, session: s, route, go, say, isCurrent: () => seq === renderSeq });
  } catch (e) {
    if (seq !== renderSeq) return;
    view.replaceChildren(h('p', { class: 'error', role: 'alert', id: 'page-error' }, errorText(e)));
  } finally {
    view.removeAttribute('aria-busy');
    if (seq === renderSeq) {
      // The page's data is drawn: a mark for the browser's performance tools.
      performance.mark('cardhour:ready', { detail: r.name });
      view.dataset.ready = 'true';
    }
  }
}

let lastRoute = '';

function onHash() {
  const name = parseHash().name;
  render().then(() => {
    // Move focus to the page on navigation (not on the first load).
    if (lastRoute && lastRoute !== location.hash) main.focus({ preventScroll: false });
    lastRoute = location.hash;
  });
  return name;
}

setUnauthorizedHook(() => {
  clearSession();
  signedIn = null;
  setCSRF('');
  renderChrome();
  loginPage(t('login.bad', { detail: 'HTTP 401' }));
});

// The skip link focuses the content without changing the route.
document.getElementById('skip-link').addEventListener('click', (e) => {
  e.preventDefault();
  main.focus();
});

setLang(pickLang());
document.getElementById('lang').addEventListener('change', (e) => { setLang(e.target.value); say(''); render(); });
document.getElementById('logout').addEventListener('click', async () => {
  if (!token() && signedIn) {
    // End the session on the server (and, where the provider has one, at
    // the provider: RP-initiated logout).
    try {
      const r = await request('POST', '/auth/logout');
      signedIn = null;
      setCSRF('');
      clearSession();
      location.assign(r.redirect || '/ui/');
      return;
    } catch (e) {
      say(errorText(e));
      return;
    }
  }
  clearSession();
  history.replaceState(null, '', '#/');
  render();
  say('');
});
window.addEventListener('hashchange', onHash);
lastRoute = location.hash;
loadSession().then(render);
