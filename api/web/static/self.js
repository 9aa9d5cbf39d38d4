// Students help themselves: the cost so far and a one-click release of a
// held instance on Now (the API's POST /api/v1/held/release, with the
// watcher's releasers), and exemption requests on Exemptions (a student
// asks; the project's lead, admin or finance grants or refuses). Every
// amount shown is the API's (cost of GET /api/v1/held), only formatted.

import { get, request } from './api.js';
import { badge, errorText, h, money, table, time } from './format.js';
import { t } from './i18n.js';

let current = { session: null, say: () => {}, after: () => {} };

// setNow tells the Now page's columns who is signed in, how to say what
// happened and what to do after a release (read again).
export function setNow(session, say, after) {
  current = { session, say, after };
}

async function release(x, btn) {
  const what = [x.instance, x.node, x.profile].filter(Boolean).join(' · ');
  if (!window.confirm(t('self.confirm', { what }))) return;
  btn.disabled = true;
  try {
    const r = await request('POST', '/api/v1/held/release', { body: { instance: x.instance } });
    const key = r.repeated ? 'self.repeated' : r.release.status === 'done' ? 'self.released' : 'self.pending';
    current.say(t(key, { instance: x.instance, action: r.release.action || '' }));
    btn.replaceWith(badge('finalized', t('self.releasedBadge')));
    current.after();
  } catch (ex) {
    current.say(t('self.notReleased', { instance: x.instance }) + ' ' + errorText(ex));
    btn.disabled = false;
  }
}

// nowColumns are the Now table's cost so far and release columns.
export function nowColumns() {
  const cur = current.session?.currency;
  return [
    { label: t('self.cost'), num: true, value: (x) => (x.cost ? h('span', { class: 'held-cost' }, money(x.cost, cur)) : t('self.unpriced')) },
    { label: t('alerts.actions'), value: (x) => {
      const b = h('button', { type: 'button', class: 'danger', 'data-release': x.instance, 'aria-label': t('self.releaseLabel', { instance: x.instance }) },
        t('self.release'));
      b.addEventListener('click', () => release(x, b));
      return b;
    } },
  ];
}

// ---------------------------------------------------------------- requests

const STAFF = ['admin', 'finance', 'lead'];

function statusBadge(r) {
  const kind = { pending: 'draft', granted: 'finalized', refused: 'void' }[r.status];
  return badge(kind, t('self.req.' + r.status));
}

// requestsSection is the Exemptions page's requests: a student's form
// (prefilled from the alert's link, ?request=<instance>) and their
// requests; staff's pending and decided requests with grant and refuse.
export async function requestsSection(ctx) {
  const { session, route } = ctx;
  const staff = STAFF.includes(session.me.role);
  const page = await get('/api/v1/exemption-requests', { limit: 100 });
  const decide = async (r, how, btn) => {
    let body = {};
    if (how === 'refuse') {
      const reason = window.prompt(t('self.refuseWhy', { id: r.id }));
      if (!reason || !reason.trim()) return;
      body = { reason: reason.trim() };
    }
    btn.disabled = true;
    try {
      await request('POST', `/api/v1/exemption-requests/${r.id}/${how}`, { body });
      ctx.say(t(how === 'grant' ? 'self.grantOk' : 'self.refuseOk', { id: r.id }));
      ctx.go('exemptions', { at: Date.now() });
    } catch (ex) {
      ctx.say(errorText(ex));
      btn.disabled = false;
    }
  };
  const cols = [
    staff ? { label: t('inv.user'), value: (r) => [r.user, h('span', { class: 'muted' }, ' · ' + r.project)] } : null,
    { label: t('now.instance'), value: (r) => (r.instance_id ? h('code', {}, r.instance_id) : t('self.allMine')) },
    { label: t('ex.until'), value: (r) => time(r.until) },
    { label: t('ex.reason'), value: (r) => r.reason },
    { label: t('alerts.status'), value: (r) => [statusBadge(r), r.answer ? [h('br'), h('small', {}, r.answer)] : null,
      r.decided_by ? [h('br'), h('small', { class: 'muted' }, `${r.decided_by} · ${time(r.decided_at)}`)] : null] },
    staff ? { label: t('alerts.actions'), value: (r) => {
      if (r.status !== 'pending') return '';
      const g = h('button', { type: 'button', 'data-grant-request': r.id }, t('self.grant'));
      const f = h('button', { type: 'button', class: 'danger', 'data-refuse-request': r.id }, t('self.refuse'));
      g.addEventListener('click', () => decide(r, 'grant', g));
      f.addEventListener('click', () => decide(r, 'refuse', f));
      return [g, ' ', f];
    } } : null,
  ].filter(Boolean);
  const list = page.items.length ? table(t('self.requests'), cols, page.items, { id: 'exemption-requests' }) : h('p', {}, t('self.noRequests'));
  const out = h('section', { id: 'requests', 'aria-labelledby': 'requests-head' }, h('h2', { id: 'requests-head' }, t('self.requests')),
    h('p', { class: 'muted' }, t(staff ? 'self.requestsStaff' : 'self.requestsHelp')), list);
  if (session.me.role === 'student') out.append(await requestForm(ctx, route.params.get('request') || ''));
  return out;
}

async function requestForm(ctx, asked) {
  const held = await get('/api/v1/held').catch(() => ({ items: [] }));
  const ids = [...new Set([...held.items.map((x) => x.instance), asked].filter(Boolean))].sort();
  const instance = h('select', { id: 'req-instance' }, h('option', { value: '' }, t('self.allMine')),
    ids.map((id) => h('option', { value: id, selected: id === asked }, id)));
  const until = h('input', { type: 'datetime-local', id: 'req-until', required: true });
  const reason = h('input', { id: 'req-reason', required: true, maxlength: 2000 });
  const err = h('p', { class: 'error', role: 'alert' });
  const field = (el, key) => [h('label', { for: el.id }, t(key)), el];
  const form = h('form', { class: 'card fields', id: 'request-form' }, h('h2', {}, t('self.ask')), h('p', { class: 'muted' }, t('self.askHelp')),
    field(instance, 'now.instance'), field(until, 'ex.untilLocal'), field(reason, 'ex.reason'),
    h('button', { type: 'submit', id: 'request' }, t('self.ask')), err);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const when = new Date(until.value);
    if (Number.isNaN(when.getTime())) { until.focus(); return; }
    try {
      await request('POST', '/api/v1/exemption-requests', { body: { instance_id: instance.value, until: when.toISOString(), reason: reason.value.trim() } });
      ctx.say(t('self.askOk'));
      ctx.go('exemptions', { at: Date.now() });
    } catch (ex) {
      err.textContent = errorText(ex);
    }
  });
  return form;
}
