// The watcher's pages: alerts (acknowledge, deliveries with their
// failures), releases, exemptions (grant and revoke) and budgets (set and
// delete). The API scopes what each role sees (a lead its project, a student
// only what is about itself); the forms are offered to the roles the API
// lets write.

import { requestsSection } from './self.js';
import { get, getAll, request } from './api.js';
import { badge, errorText, getZone, h, money, table, time } from './format.js';
import { t } from './i18n.js';

const STAFF = ['admin', 'finance', 'lead'];
const FINANCE = ['admin', 'finance'];

function head(title, ...extra) {
  return h('div', { class: 'page-head' }, h('h1', {}, title), ...extra);
}

function tz() {
  return h('p', { class: 'muted' }, t('tz.note', { tz: getZone() }));
}



// select builds a labelled <select> of values (with "" as every value).
function select(id, label, values, current, allLabel) {
  const sel = h('select', { id, name: id },
    allLabel ? h('option', { value: '' }, allLabel) : null,
    values.map(([v, text]) => h('option', { value: v, selected: v === current }, text)));
  return [h('label', { for: id }, label), sel];
}

// pager lists a cursor-paginated route: the first page at once, the next
// on "Load more".
async function pager(ctx, path, query, render) {
  let page = await get(path, { ...query, limit: 100 });
  if (!ctx.isCurrent()) return null;
  const items = [...page.items];
  const wrap = h('div', {});
  const draw = () => {
    const more = page.next_cursor ? h('button', { type: 'button', class: 'secondary', id: 'more' }, t('more')) : null;
    more?.addEventListener('click', async () => {
      more.disabled = true;
      try {
        page = await get(path, { ...query, limit: 100, cursor: page.next_cursor });
        items.push(...page.items);
        draw();
      } catch (ex) {
        ctx.say(errorText(ex));
        more.disabled = false;
      }
    });
    wrap.replaceChildren(...[items.length ? render(items) : h('p', {}, t('none')), more].filter(Boolean));
  };
  draw();
  return wrap;
}

// ---------------------------------------------------------------- alerts

const KINDS = ['idle_warning', 'idle_reminder', 'idle_release', 'idle_release_dry_run', 'idle_release_failed', 'budget_threshold',
  'exemption_requested', 'exemption_decided'];

function factsText(a) {
  const f = a.facts || {};
  const bits = [];
  if (f.node) bits.push(f.node);
  if (f.gpu_model) bits.push([f.gpu_model, f.profile].filter(Boolean).join(' '));
  if (f.budget) bits.push(t('alerts.budget', { percent: a.threshold, period: a.period }));
  if (f.outcome) bits.push(f.outcome);
  return bits.join(' · ');
}

async function alertsPage(ctx) {
  const { view, session, route } = ctx;
  const staff = STAFF.includes(session.me.role);
  const status = route.params.get('status') || '';
  const kind = KINDS.includes(route.params.get('kind')) ? route.params.get('kind') : '';
  const [sLabel, sSel] = select('alert-status', t('alerts.status'), [['open', t('alerts.open')], ['acked', t('alerts.acked')]], status, t('alerts.any'));
  const [kLabel, kSel] = select('alert-kind', t('alerts.kind'), KINDS.map((k) => [k, t('kind.alert.' + k)]), kind, t('alerts.any'));
  const form = h('form', { class: 'inline', id: 'alerts-filter' }, sLabel, sSel, kLabel, kSel, h('button', { type: 'submit' }, t('apply')));
  form.addEventListener('submit', (e) => { e.preventDefault(); ctx.go('alerts', { status: sSel.value, kind: kSel.value }); });
  const deliveries = h('section', { id: 'deliveries', 'aria-live': 'polite' });

  const ack = async (a, btn) => {
    btn.disabled = true;
    try {
      await request('POST', `/api/v1/alerts/${a.id}/ack`);
      ctx.say(t('alerts.ackOk', { id: a.id }));
      ctx.go('alerts', { status, kind, at: Date.now() });
    } catch (ex) {
      ctx.say(errorText(ex));
      btn.disabled = false;
    }
  };
  // A delivery failed for good: an admin sends it again (it goes in the
  // leader's next delivery round).
  const resendButton = (d, a) => {
    const b = h('button', { type: 'button', class: 'secondary', 'data-resend': d.id, 'aria-label': t('dl.resendLabel', { id: d.id }) }, t('dl.resend'));
    b.addEventListener('click', async () => {
      b.disabled = true;
      try {
        await request('POST', `/api/v1/deliveries/${d.id}/resend`);
        ctx.say(t('dl.resendOk', { id: d.id }));
        await showDeliveries(a);
      } catch (ex) {
        b.disabled = false;
        ctx.say(errorText(ex));
      }
    });
    return b;
  };
  const showDeliveries = async (a) => {
    deliveries.replaceChildren(h('p', {}, t('loading')));
    try {
      const ds = (await getAll(`/api/v1/alerts/${a.id}/deliveries`)).items;
      deliveries.replaceChildren(h('h2', {}, t('alerts.deliveriesOf', { id: a.id })), ds.length === 0 ? h('p', {}, t('none')) : table(t('alerts.deliveriesOf', { id: a.id }), [
        { label: t('dl.channel'), value: (d) => d.channel },
        { label: t('dl.recipient'), value: (d) => d.recipient },
        { label: t('dl.status'), value: (d) => badge(d.status === 'failed' ? 'void' : d.status === 'sent' ? 'finalized' : 'draft', t(d.status === 'sent' ? 'dl.sent.state' : 'dl.' + d.status)) },
        { label: t('dl.attempts'), num: true, value: (d) => d.attempts },
        { label: t('dl.lastError'), value: (d) => d.last_error || '—' },
        { label: t('dl.next'), value: (d) => time(d.next_attempt_at) || '—' },
        { label: t('dl.sent'), value: (d) => time(d.sent_at) || '—' },
        ...(session.me.role === 'admin' ? [{ label: t('alerts.actions'), value: (d) => (d.status !== 'failed' ? '' : resendButton(d, a)) }] : []),
      ], ds, { id: 'deliveries-table', showCaption: false }));
      deliveries.querySelector('h2').focus?.();
    } catch (ex) {
      deliveries.replaceChildren(h('p', { class: 'error', role: 'alert' }, errorText(ex)));
    }
  };
  const list = await pager(ctx, '/api/v1/alerts', { status, kind }, (items) => table(t('alerts.title'), [
    { label: t('alerts.when'), value: (a) => time(a.created_at) },
    { label: t('alerts.kind'), value: (a) => t('kind.alert.' + a.kind) },
    { label: t('inv.project'), value: (a) => a.project },
    { label: t('inv.user'), value: (a) => a.user || '—' },
    { label: t('now.instance'), value: (a) => (a.instance_id ? h('code', {}, a.instance_id) : '—') },
    { label: t('alerts.what'), value: (a) => factsText(a) },
    { label: t('alerts.status'), value: (a) => (a.status === 'acked'
      ? [badge('finalized', t('alerts.acked')), h('br'), h('small', {}, t('alerts.ackedBy', { who: a.acked_by, t: time(a.acked_at) }))]
      : badge('idle', t('alerts.open'))) },
    { label: t('alerts.actions'), value: (a) => {
      const out = [];
      if (a.status === 'open') {
        const b = h('button', { type: 'button', class: 'secondary', 'data-ack': a.id, 'aria-label': t('alerts.ackLabel', { id: a.id }) }, t('alerts.ack'));
        b.addEventListener('click', () => ack(a, b));
        out.push(b);
      }
      if (staff) {
        const b = h('button', { type: 'button', class: 'secondary', 'data-deliveries': a.id, 'aria-label': t('alerts.deliveriesLabel', { id: a.id }) }, t('alerts.deliveries'));
        b.addEventListener('click', () => showDeliveries(a));
        out.push(' ', b);
      }
      return out;
    } },
  ], items, { id: 'alerts' }));
  if (!list) return;
  view.replaceChildren(head(t('alerts.title')), h('p', { class: 'muted' }, t('alerts.help')), form, tz(), list, deliveries);
}

// ---------------------------------------------------------------- releases

async function releasesPage(ctx) {
  const { view, route } = ctx;
  const status = route.params.get('status') || '';
  const statuses = ['pending', 'done', 'dry_run', 'failed'];
  const [sLabel, sSel] = select('release-status', t('alerts.status'), statuses.map((s) => [s, t('rel.' + s)]), status, t('alerts.any'));
  const form = h('form', { class: 'inline' }, sLabel, sSel, h('button', { type: 'submit' }, t('apply')));
  form.addEventListener('submit', (e) => { e.preventDefault(); ctx.go('releases', { status: sSel.value }); });
  const kindOf = (s) => ({ done: 'finalized', failed: 'void', dry_run: 'draft', pending: 'idle' })[s];
  const list = await pager(ctx, '/api/v1/releases', { status: statuses.includes(status) ? status : '' }, (items) => table(t('rel.title'), [
    { label: t('rel.when'), value: (r) => time(r.updated_at) },
    { label: t('now.instance'), value: (r) => h('code', {}, r.instance_id) },
    { label: t('now.node'), value: (r) => r.node || '—' },
    { label: t('inv.project'), value: (r) => r.project || '—' },
    { label: t('inv.user'), value: (r) => r.user || '—' },
    { label: t('rel.idleSince'), value: (r) => time(r.streak_start) },
    { label: t('alerts.status'), value: (r) => badge(kindOf(r.status), t('rel.' + r.status)) },
    { label: t('rel.what'), value: (r) => r.action || r.last_error || '—' },
    { label: t('dl.attempts'), num: true, value: (r) => r.attempts },
    { label: t('rel.retry'), value: (r) => time(r.retry_at) || '—' },
  ], items, { id: 'releases' }));
  if (!list) return;
  view.replaceChildren(head(t('rel.title')), h('p', { class: 'muted' }, t('rel.help')), form, tz(), list);
}

// ---------------------------------------------------------------- exemptions

async function exemptionsPage(ctx) {
  const { view, session, route } = ctx;
  const staff = STAFF.includes(session.me.role);
  const active = route.params.get('active') === 'true';
  const box = h('input', { type: 'checkbox', id: 'ex-active', checked: active });
  box.addEventListener('change', () => ctx.go('exemptions', { active: box.checked ? 'true' : '' }));
  const revoke = async (e, btn) => {
    btn.disabled = true;
    try {
      await request('DELETE', `/api/v1/exemptions/${e.id}`);
      ctx.say(t('ex.revokeOk', { id: e.id }));
      ctx.go('exemptions', { active: active ? 'true' : '', at: Date.now() });
    } catch (ex) {
      ctx.say(errorText(ex));
      btn.disabled = false;
    }
  };
  const state = (e) => (e.revoked_at ? badge('void', t('ex.revoked')) : e.active ? badge('finalized', t('ex.active')) : badge('draft', t('ex.ended')));
  const list = await pager(ctx, '/api/v1/exemptions', { active: active ? 'true' : '' }, (items) => table(t('ex.title'), [
    { label: t('inv.project'), value: (e) => e.project },
    { label: t('inv.user'), value: (e) => e.user || t('ex.allStudents') },
    { label: t('now.instance'), value: (e) => (e.instance_id ? h('code', {}, e.instance_id) : t('ex.allInstances')) },
    { label: t('ex.until'), value: (e) => time(e.until) },
    { label: t('ex.reason'), value: (e) => e.reason },
    { label: t('ex.grantedBy'), value: (e) => `${e.granted_by} · ${time(e.created_at)}` },
    { label: t('alerts.status'), value: state },
    { label: t('alerts.actions'), value: (e) => {
      if (!staff || e.revoked_at || !e.active) return '';
      const b = h('button', { type: 'button', class: 'danger', 'data-revoke': e.id, 'aria-label': t('ex.revokeLabel', { id: e.id }) }, t('ex.revoke'));
      b.addEventListener('click', () => revoke(e, b));
      return b;
    } },
  ], items, { id: 'exemptions' }));
  if (!list) return;
  const requests = await requestsSection(ctx);
  if (!ctx.isCurrent()) return;
  view.replaceChildren(head(t('ex.title')), h('p', { class: 'muted' }, t('ex.help')),
    h('p', {}, box, ' ', h('label', { for: 'ex-active' }, t('ex.onlyActive'))), tz(), requests, list, ...(staff ? [grantForm(ctx, session)] : []));
}

function grantForm(ctx, session) {
  const own = session.me.project || '';
  const project = h('input', { id: 'ex-project', required: true, value: own, readonly: own !== '' });
  const user = h('input', { id: 'ex-user', placeholder: t('ex.allStudents') });
  const instance = h('input', { id: 'ex-instance', placeholder: t('ex.allInstances') });
  const until = h('input', { type: 'datetime-local', id: 'ex-until', required: true });
  const reason = h('input', { id: 'ex-reason', required: true, maxlength: 2000 });
  const err = h('p', { class: 'error', role: 'alert' });
  const field = (el, key) => [h('label', { for: el.id }, t(key)), el];
  const form = h('form', { class: 'card fields', id: 'grant-form' }, h('h2', {}, t('ex.grant')), h('p', { class: 'muted' }, t('ex.grantHelp')),
    field(project, 'inv.project'), field(user, 'inv.user'), field(instance, 'now.instance'), field(until, 'ex.untilLocal'), field(reason, 'ex.reason'),
    h('button', { type: 'submit', id: 'grant' }, t('ex.grant')), err);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const when = new Date(until.value);
    if (Number.isNaN(when.getTime())) { until.focus(); return; }
    try {
      await request('POST', '/api/v1/exemptions', { body: { project: project.value.trim(), user: user.value.trim(), instance_id: instance.value.trim(),
        until: when.toISOString(), reason: reason.value.trim() } });
      ctx.say(t('ex.grantOk'));
      ctx.go('exemptions', { at: Date.now() });
    } catch (ex) {
      err.textContent = errorText(ex);
    }
  });
  return form;
}

// ---------------------------------------------------------------- budgets

async function budgetsPage(ctx) {
  const { view, session } = ctx;
  const role = session.me.role;
  const mayWrite = (b) => FINANCE.includes(role) || (role === 'lead' && b.scope === 'student');
  const del = async (b, btn) => {
    btn.disabled = true;
    try {
      await request('DELETE', `/api/v1/budgets/${b.id}`);
      ctx.say(t('bud.deleteOk', { id: b.id }));
      ctx.go('budgets', { at: Date.now() });
    } catch (ex) {
      ctx.say(errorText(ex));
      btn.disabled = false;
    }
  };
  const amount = (b, v) => (b.unit === 'money' ? money(v, session.currency) : t('bud.hours', { n: v }));
  const leftText = (b) => (b.status.left.startsWith('-') ? t('bud.over', { amount: amount(b, b.status.left.slice(1)) }) : amount(b, b.status.left));
  const usedCell = (b) => {
    if (!b.status) return h('span', { class: 'muted', 'data-budget': b.id, 'data-status': 'none' }, t('bud.notMeasured'));
    const st = b.status;
    return h('div', { 'data-budget': b.id, 'data-status': st.reached ? 'reached' : 'under' },
      h('div', {}, t('bud.usedOf', { used: amount(b, st.used), limit: amount(b, b.limit), percent: st.percent })),
      h('div', { class: 'meter' + (st.reached ? ' over' : ''), role: 'img', 'aria-label': `${st.percent} %` },
        h('span', { style: `width: ${Math.min(100, st.percent)}%` })),
      h('div', { class: 'muted small' }, t('bud.asOf', { period: st.period, at: time(st.as_of) })));
  };
  const forecastCell = (b) => {
    if (!b.status) return '—';
    const st = b.status;
    const when = st.reached ? t('bud.reached') : st.reaches_limit_at ? t('bud.reachesAt', { at: time(st.reaches_limit_at) }) : t('bud.within');
    return h('div', {}, h('div', {}, amount(b, st.forecast)), h('div', { class: 'muted small', 'data-reach': '' }, when));
  };
  const list = await pager(ctx, '/api/v1/budgets', {}, (items) => table(t('bud.title'), [
    { label: t('bud.scope'), value: (b) => t('bud.scope.' + b.scope) },
    { label: t('inv.project'), value: (b) => b.project },
    { label: t('inv.user'), value: (b) => b.user || '—' },
    { label: t('bud.period'), value: (b) => t('bud.period.' + b.period) },
    { label: t('bud.limit'), num: true, value: (b) => amount(b, b.limit) },
    { label: t('bud.used'), num: true, value: (b) => usedCell(b) },
    { label: t('bud.left'), num: true, value: (b) => (b.status ? leftText(b) : '—') },
    { label: t('bud.forecast'), num: true, value: (b) => forecastCell(b) },
    { label: t('bud.thresholds'), value: (b) => b.thresholds.map((x) => x + ' %').join(', ') },
    { label: t('bud.action'), value: (b) => t('bud.action.' + b.action) },
    { label: t('inv.updated'), value: (b) => time(b.updated_at) },
    { label: t('alerts.actions'), value: (b) => {
      if (!mayWrite(b)) return '';
      const btn = h('button', { type: 'button', class: 'danger', 'data-delete': b.id, 'aria-label': t('bud.deleteLabel', { id: b.id }) }, t('bud.delete'));
      btn.addEventListener('click', () => del(b, btn));
      return btn;
    } },
  ], items, { id: 'budgets' }));
  if (!list) return;
  const out = [head(t('bud.title')), h('p', { class: 'muted' }, t('bud.help')), h('p', { class: 'muted' }, t('bud.forecastHelp')), list];
  if (STAFF.includes(role)) out.push(budgetForm(ctx, session));
  view.replaceChildren(...out);
}

function budgetForm(ctx, session) {
  const lead = session.me.role === 'lead';
  const own = session.me.project || '';
  const [scopeL, scope] = select('bud-scope', t('bud.scope'), (lead ? ['student'] : ['project', 'student']).map((s) => [s, t('bud.scope.' + s)]), lead ? 'student' : 'project');
  const project = h('input', { id: 'bud-project', required: true, value: own, readonly: own !== '' });
  const user = h('input', { id: 'bud-user' });
  const [periodL, period] = select('bud-period', t('bud.period'), ['month', 'term'].map((s) => [s, t('bud.period.' + s)]), 'month');
  const [unitL, unit] = select('bud-unit', t('bud.unit'), [['money', session.currency || t('bud.unit.money')], ['card_hours', t('bud.unit.card_hours')]], 'money');
  const limit = h('input', { id: 'bud-limit', required: true, inputmode: 'decimal', pattern: '[0-9]+(\\.[0-9]+)?' });
  const thresholds = h('input', { id: 'bud-thresholds', value: '50, 80, 100' });
  const [actionL, action] = select('bud-action', t('bud.action'), ['warn', 'release'].map((s) => [s, t('bud.action.' + s)]), 'warn');
  const err = h('p', { class: 'error', role: 'alert' });
  const field = (el, key) => [h('label', { for: el.id }, t(key)), el];
  const form = h('form', { class: 'card fields', id: 'budget-form' }, h('h2', {}, t('bud.set')), h('p', { class: 'muted' }, t(lead ? 'bud.setHelpLead' : 'bud.setHelp')),
    scopeL, scope, field(project, 'inv.project'), field(user, 'inv.user'), periodL, period, unitL, unit, field(limit, 'bud.limit'),
    field(thresholds, 'bud.thresholdsHelp'), actionL, action, h('button', { type: 'submit', id: 'set-budget' }, t('bud.set')), err);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const ts = thresholds.value.split(/[,\s]+/).filter(Boolean).map(Number);
    if (ts.some((x) => !Number.isInteger(x))) { err.textContent = t('bud.badThresholds'); thresholds.focus(); return; }
    try {
      const b = await request('PUT', '/api/v1/budgets', { body: { scope: scope.value, project: project.value.trim(), user: user.value.trim(),
        period: period.value, unit: unit.value, limit: limit.value.trim(), thresholds: ts, action: action.value } });
      ctx.say(t('bud.setOk', { id: b.id }));
      ctx.go('budgets', { at: Date.now() });
    } catch (ex) {
      err.textContent = errorText(ex);
    }
  });
  return form;
}

export const watchPages = { alerts: alertsPage, releases: releasesPage, exemptions: exemptionsPage, budgets: budgetsPage };
