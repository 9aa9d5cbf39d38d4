// The pages. Each reads the API routes its role may read, and nothing else:
// the API scopes the data (a student's usage and held instances are their
// own), and the navigation offers a page only to the roles its routes allow.

import { nowColumns, setNow } from './self.js';
import { ApiError, download, get, getAll, post, request } from './api.js';
import { badge, duration, errorText, getZone, h, hours, money, statusText, sumMoney, table, thisMonth, time } from './format.js';
import { approveControl, periodFinance } from './finance.js';
import { getLang, t } from './i18n.js';

const FINANCE = ['admin', 'finance'];

export function sectionHead(title, ...extra) {
  return h('div', { class: 'page-head' }, h('h1', {}, title), ...extra);
}

export function tzNote() {
  return h('p', { class: 'muted' }, t('tz.note', { tz: getZone() }));
}

// periodForm is a month picker that changes the route's period.
// With allowAll, an empty month (or the "all months" link) shows every month.
export function periodForm(ctx, name, period, extraParams = {}, allowAll = false) {
  const input = h('input', { type: 'month', id: 'period', name: 'period', value: period === 'all' ? '' : period || '', required: !allowAll });
  const form = h('form', { class: 'inline', id: 'period-form' },
    h('label', { for: 'period' }, t('period')), input,
    h('button', { type: 'submit' }, t('apply')),
    allowAll ? h('a', { href: `#/${name}?period=all`, 'aria-current': period === 'all' ? 'true' : undefined }, t('all.periods')) : null);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    ctx.go(name, { ...extraParams, period: input.value || (allowAll ? 'all' : thisMonth()) });
  });
  return form;
}

// defaultPeriod is the month a page opens on when the route names none: the
// current month (in the catalog's zone) when it has usage, else the latest
// month that has (the data's month, e.g. a demo's simulated time or a
// store that stopped), else the current one. One usage query grouped by
// month over the last year, kept for a minute.
const DATA_MONTH = 'cardhour.dataMonth';

async function defaultPeriod() {
  const cur = thisMonth();
  try {
    const c = JSON.parse(sessionStorage.getItem(DATA_MONTH) || 'null');
    if (c && c.cur === cur && Date.now() - c.at < 60000) return c.month;
  } catch { /* recompute */ }
  let month = cur;
  try {
    const now = Date.now();
    const rep = await getAll('/api/v1/usage', { from: new Date(now - 366 * 864e5).toISOString(), to: new Date(now + 31 * 864e5).toISOString(), group_by: ['month'] });
    const months = rep.rows.filter((r) => r.held_seconds > 0 && r.month).map((r) => r.month).sort();
    if (months.length && !months.includes(cur)) month = months.at(-1);
  } catch {
    // No usage store, or no right to read it: the current month.
  }
  sessionStorage.setItem(DATA_MONTH, JSON.stringify({ cur, month, at: Date.now() }));
  return month;
}

// periodOf is the route's period, or the default one (written into the
// address, so that reloading and links keep it).
export async function periodOf(ctx, name, extra = {}) {
  const p = ctx.route.params.get('period');
  if (p) return p;
  const d = await defaultPeriod();
  if (ctx.isCurrent()) {
    const q = new URLSearchParams({ ...Object.fromEntries(ctx.route.params), ...extra, period: d });
    history.replaceState(null, '', `#/${name}${ctx.route.rest.length ? '/' + ctx.route.rest.join('/') : ''}?${q}`);
  }
  return d;
}

// documents reads the documents of invoices (a few at a time), kept by id
// and SHA-256 (a revision's document never changes under its hash).
const docCache = new Map();

export async function documents(items) {
  const out = new Map();
  const queue = [...items];
  const worker = async () => {
    for (let i = queue.shift(); i; i = queue.shift()) {
      const key = `${i.id}:${i.sha256}`;
      if (!docCache.has(key)) docCache.set(key, (await get(`/api/v1/invoices/${i.id}`)).document || {});
      out.set(i.id, docCache.get(key));
    }
  };
  await Promise.all(Array.from({ length: Math.min(6, queue.length) }, worker));
  return out;
}

// invoiceTotals sums the invoices that count (not void), by status.
export function invoiceTotals(items, totalOf) {
  const live = items.filter((i) => i.status !== 'void');
  const of = (st) => live.filter((i) => st === undefined || i.status === st).map(totalOf);
  return { n: live.length, total: sumMoney(of()), drafts: sumMoney(of('draft')), finalized: sumMoney(of('finalized')),
    nDrafts: live.filter((i) => i.status === 'draft').length, nFinalized: live.filter((i) => i.status === 'finalized').length };
}

// ---------------------------------------------------------------- now

// The Now page is live: it reads what is held and how fresh each node's
// data is again at the server's refresh interval (GET /api/v1/nodes tells
// it: the interval the watcher runs at), while the page is shown and the tab
// visible; each read replaces the tables in place (the page stays, so does
// the scroll), a failed one says so quietly and the next one retries.
let stopNow = () => {};

// A fleet is shown a page at a time: the server sums up what is held and
// how many nodes are silent; the page lists the first HELD_PAGE held
// instances and NODES_PAGE nodes (the silent ones first) and loads more on
// request. A filter (a node, idle only) narrows the held list.
const HELD_PAGE = 200;
const NODES_PAGE = 100;

async function readNow(v) {
  const q = new URLSearchParams({ limit: String(v.held) });
  if (v.node) q.set('node', v.node);
  if (v.idle) q.set('state', 'idle');
  const [held, nodes] = await Promise.all([
    get('/api/v1/held?' + q), get('/api/v1/nodes?' + new URLSearchParams({ order: 'silent', limit: String(v.nodes) }))]);
  return { held, nodes };
}

async function nowPage(ctx) {
  const { view, route } = ctx;
  // The filters are the route's (#/now?node=…&state=idle), so a view of
  // one node can be linked to; limit is the first page's size.
  const limit = Math.min(Math.max(Number(route.params.get('limit')) || HELD_PAGE, 1), 10000);
  const v = { held: limit, nodes: NODES_PAGE, node: route.params.get('node') || '', idle: route.params.get('state') === 'idle' };
  let data = await readNow(v);
  if (!ctx.isCurrent()) return;
  const el = nowElements();
  el.cur = ctx.session.currency;
  el.idleOnly.checked = v.idle;
  view.replaceChildren(
    sectionHead(t('now.title'), el.refresh),
    h('p', { class: 'muted' }, el.live, ' · ', t('tz.note', { tz: getZone() })),
    el.notice, el.summary, el.nodesSummary, el.filter, el.heldNodes, el.heldMore,
    h('section', { id: 'nodes', 'aria-labelledby': 'nodes-head' }, h('h2', { id: 'nodes-head' }, t('now.nodes')), el.rule, el.nodesTable, el.nodesMore));
  let heldKey = '';
  setNow(ctx.session, ctx.say, () => el.refresh.click());
  const draw = () => {
    drawNowSummary(el, data, v);
    const key = JSON.stringify([data.held.items, data.nodes.items.filter((n) => n.silent).map((n) => n.node)]);
    if (key === heldKey) return; // the held instances' sections change only when what is held does
    heldKey = key;
    drawHeld(el, data, v);
  };
  draw();
  const poll = nowPolling(view, el, () => data, async () => { data = await readNow(v); draw(); });
  el.heldMore.addEventListener('click', () => { v.held += limit; poll(); });
  el.nodesMore.addEventListener('click', () => { v.nodes += NODES_PAGE; poll(); });
  const state = () => (el.idleOnly.checked ? 'idle' : '');
  el.idleOnly.addEventListener('change', () => ctx.go('now', { node: v.node, state: state() }));
  el.showAll.addEventListener('click', () => ctx.go('now', { state: state() }));
  el.nodesTable.addEventListener('click', (e) => {
    const b = e.target.closest('button[data-node]');
    if (b) ctx.go('now', { node: b.dataset.node, state: state() });
  });
}

// nowElements are the Now page's parts that each read fills in.
function nowElements() {
  const idleOnly = h('input', { type: 'checkbox', id: 'now-idle-only' });
  const showAll = h('button', { type: 'button', class: 'secondary', id: 'now-all-nodes', hidden: true }, t('now.allNodes'));
  return {
    refresh: h('button', { type: 'button', class: 'secondary', id: 'refresh' }, t('refresh')),
    live: h('span', { id: 'now-live' }),
    notice: h('p', { class: 'notice', id: 'now-notice', role: 'status', hidden: true }),
    summary: h('p', { id: 'held-summary' }),
    nodesSummary: h('p', { id: 'nodes-summary' }),
    rule: h('p', { class: 'muted', id: 'silent-rule' }),
    idleOnly, showAll,
    filter: h('p', { class: 'filters', id: 'now-filter' }, h('label', {}, idleOnly, ' ', t('now.idleOnly')), ' ',
      h('span', { id: 'now-filter-text' }), ' ', showAll),
    heldNodes: h('div', { id: 'held-nodes' }),
    heldMore: h('button', { type: 'button', class: 'secondary', id: 'held-more', hidden: true }),
    nodesTable: h('div', { id: 'node-freshness-wrap' }),
    nodesMore: h('button', { type: 'button', class: 'secondary', id: 'nodes-more', hidden: true }),
  };
}

// drawNowSummary writes the totals (the server's, of everything that
// matches) and the paging lines.
function drawNowSummary(el, data, v) {
  const { held, nodes } = data;
  const silent = nodes.items.filter((n) => n.silent).map((n) => n.node);
  el.live.textContent = t('now.live', { time: time(nodes.checked_at), s: nodes.refresh_s });
  const cur = el.cur;
  el.summary.textContent = t('now.summary', { held: held.total, nodes: held.nodes, idle: held.idle }) +
    (held.cost ? t('now.costSoFar', { cost: money(held.cost, cur) }) : '') +
    (held.unpriced ? t('now.unpriced', { n: held.unpriced }) : '');
  const shownSilent = silent.slice(0, 10).join(', ') + (nodes.silent > 10 ? ', …' : '');
  el.nodesSummary.textContent = t('now.nodesSummary', { ok: nodes.total - nodes.silent, silent: nodes.silent,
    names: nodes.silent ? t('now.silentNames', { nodes: shownSilent }) : '' });
  el.nodesSummary.classList.toggle('warn', nodes.silent > 0);
  el.rule.textContent = t('now.silentRule', { min: Math.round(nodes.silent_after_s / 60), h: Math.round(nodes.lookback_s / 3600) });
  el.nodesTable.replaceChildren(nodes.items.length
    ? freshnessTable(nodes, cur)
    : h('p', {}, t('now.noNodes', { h: Math.round(nodes.lookback_s / 3600) })));
  el.nodesMore.hidden = !nodes.next_cursor;
  el.nodesMore.textContent = t('now.moreNodes', { n: nodes.items.length, total: nodes.total });
  el.heldMore.hidden = !held.next_cursor;
  el.heldMore.textContent = t('now.moreHeld', { n: held.items.length, total: held.total });
  el.filter.querySelector('#now-filter-text').textContent = v.node ? t('now.onNode', { node: v.node }) : '';
  el.showAll.hidden = !v.node;
}

// drawHeld is the held instances of the page, by node (silent ones marked).
function drawHeld(el, data, v) {
  const items = data.held.items;
  const silent = new Set(data.nodes.items.filter((n) => n.silent).map((n) => n.node));
  const heldOn = [...new Set(items.map((x) => x.node))].sort();
  const out = [];
  if (items.length === 0) out.push(h('p', {}, v.node || v.idle ? t('now.noneMatch') : t('none')));
  for (const node of heldOn) {
    const rows = items.filter((x) => x.node === node).sort((a, b) => a.instance.localeCompare(b.instance));
    out.push(h('section', { class: 'node', 'aria-labelledby': 'node-' + node },
      h('h2', { id: 'node-' + node }, node, silent.has(node) ? [' ', badge('silent', t('now.silent'))] : null),
      h('div', { id: 'held-' + node }, nodeCards(node, rows))));
  }
  el.heldNodes.replaceChildren(...out);
}

// nowPolling reads again at the server's refresh interval: one read at a
// time, none while the tab is hidden, none once the page is left (leave,
// another render, a sign-out). It returns the function that reads now.
function nowPolling(view, el, data, reread) {
  let timer = 0, busy = false, stopped = false;
  const every = () => Math.max(1, Number(data().nodes.refresh_s) || 30) * 1000;
  const schedule = () => {
    clearTimeout(timer);
    if (!stopped && !document.hidden) timer = setTimeout(poll, every());
  };
  const poll = async () => {
    if (stopped || busy) return;
    if (!view.isConnected) { stop(); return; }
    busy = true;
    clearTimeout(timer);
    try {
      await reread();
      if (stopped) return;
      el.notice.hidden = true;
      el.notice.textContent = '';
      view.dataset.polls = String(Number(view.dataset.polls || 0) + 1);
    } catch (e) {
      if (stopped) return;
      if (e instanceof ApiError && e.status === 401) { stop(); return; } // signed out (the hook shows the sign-in)
      el.notice.textContent = t('now.stale', { time: time(data().nodes.checked_at), s: every() / 1000 }) + ' ' + errorText(e);
      el.notice.hidden = false;
    } finally {
      busy = false;
      schedule();
    }
  };
  const onVisible = () => {
    if (document.hidden) clearTimeout(timer);
    else poll();
  };
  const stop = () => {
    stopped = true;
    clearTimeout(timer);
    document.removeEventListener('visibilitychange', onVisible);
  };
  stopNow();
  stopNow = stop;
  document.addEventListener('visibilitychange', onVisible);
  el.refresh.addEventListener('click', () => poll());
  schedule();
  return poll;
}

// freshnessTable is the nodes with when their data was last updated (and
// how long before the server's clock), silent ones marked.
function freshnessTable(nodes, cur) {
  const at = new Date(nodes.checked_at);
  const ago = (n) => duration(at - new Date(n.last_sample));
  const t0 = table(t('now.nodesCaption'), [
    { label: t('now.node'), value: (n) => (n.held
      ? h('button', { type: 'button', class: 'link', 'data-node': n.node, title: t('now.showNode', { node: n.node }) }, n.node)
      : n.node) },
    { label: t('now.nodeLast'), value: (n) => [time(n.last_sample), h('br'), h('small', {}, t('now.ago', { d: ago(n) }))] },
    { label: t('now.nodeState'), value: (n) => (n.silent ? badge('silent', t('now.silent')) : badge('busy', t('now.reporting'))) },
    { label: t('now.heldCount'), num: true, value: (n) => n.held },
    { label: t('now.idleCount'), num: true, value: (n) => n.idle },
    { label: t('now.nodeCost'), num: true, value: (n) => (n.cost ? money(n.cost, cur) : '') },
  ], nodes.items, { id: 'node-freshness', rowHeader: true });
  t0.querySelectorAll('tbody tr').forEach((tr, i) => {
    tr.dataset.node = nodes.items[i].node;
    if (nodes.items[i].silent) tr.classList.add('silent');
  });
  return t0;
}

// heldColumns are the columns of a table of held instances (without the
// GPU's model under a card's heading, which names it).
function heldColumns(withGPU = true) {
  return [
    { label: t('now.holder'), value: (x) => [x.user, h('span', { class: 'muted' }, ' · ' + x.project)] },
    { label: t('now.state'), value: (x) => x.idle
      ? [badge('idle', t('now.idle')), h('br'), h('small', {}, t('now.idleSince', { t: time(x.idle_since) }))]
      : badge('busy', t('now.busy')) },
    // How long: up to the last sample (the server's clock, not this browser's).
    { label: t('now.since'), value: (x) => [time(x.since), h('br'), h('small', {}, t('now.for', { d: duration(new Date(x.last_sample) - new Date(x.since)) }))] },
    withGPU ? { label: t('now.gpu'), value: (x) => x.gpu_model } : null,
    { label: t('now.slice'), value: (x) => sliceText(x) },
    { label: t('now.instance'), value: (x) => h('code', { title: x.instance }, instanceText(x.instance)) },
    { label: t('now.last'), value: (x) => time(x.last_sample) },
    ...nowColumns(),
  ].filter(Boolean);
}

// instanceText is an instance's ID as the page shows it: a share of a
// Kubernetes node by its namespace, pod and container (its card is the
// heading), anything else shortened.
function instanceText(id) {
  const i = id.indexOf('/share/');
  return i >= 0 ? id.slice(i + '/share/'.length) : shortID(id);
}

// sliceText is what a held instance is of its card: the whole card, a MIG
// profile, or a share's profile with its fraction of the card.
function sliceText(x) {
  if (!x.profile || x.profile === 'full') return t('now.full');
  if (x.share) return [x.profile, h('span', { class: 'muted' }, ' · ' + t('now.sharePct', { pct: percentOf([x.share]) }))];
  return x.profile;
}

// MIG profiles: 1g.10gb, 1g.10gb+me, 1c.3g.40gb (a compute instance).
const MIG_PROFILE = /^(\d+c\.)?\d+g\.\d+gb/;

// isShare: a share of a card (HAMi, time-slicing: <gpu>/share/…; a vGPU
// instance: its own UUID with a vGPU type as profile), not a MIG slice.
function isShare(x) {
  return Boolean(x.share) || x.instance.includes('/share/') || (x.instance !== x.gpu && !MIG_PROFILE.test(x.profile || ''));
}

// nodeCards is a node's held instances: the whole cards in one table (as
// they are their own card), then each card split into MIG slices or
// shares under a heading that names the card and what is held of it.
function nodeCards(node, rows) {
  const whole = rows.filter((x) => !x.gpu || x.instance === x.gpu);
  const cards = [...new Set(rows.filter((x) => !whole.includes(x)).map((x) => x.gpu))].sort();
  const out = [];
  if (whole.length) out.push(table(t('now.caption', { node }), heldColumns(), whole, { id: 'held-' + node + '-whole' }));
  for (const gpu of cards) {
    const of = rows.filter((x) => x.gpu === gpu && !whole.includes(x));
    const shares = of.filter(isShare);
    let what;
    if (shares.length) {
      const known = shares.filter((x) => x.share);
      const n = shares.length, one = n === 1 ? '1' : '';
      what = known.length === n
        ? t('now.shares' + one, { n, pct: percentOf(known.map((x) => x.share)) })
        : t('now.sharesN' + one, { n });
    } else {
      what = t(of.length === 1 ? 'now.migSlices1' : 'now.migSlices', { n: of.length });
    }
    const id = 'card-' + gpu.replace(/[^A-Za-z0-9_-]/g, '_');
    out.push(h('div', { class: 'gpu-group', 'data-gpu': gpu, role: 'group', 'aria-labelledby': id },
      h('h3', { id, class: 'gpu-head' },
        h('span', {}, of[0].gpu_model), ' · ', h('code', { title: gpu }, shortID(gpu)), ' · ', h('span', { class: 'gpu-held' }, what)),
      table(t('now.cardCaption', { node, gpu }), heldColumns(false), of, { id: 'held-' + id })));
  }
  return out;
}

// percentOf is the sum of fractions of a card (decimal strings), in
// percent, exactly: "0.05" × 8 is "40", "0.3333" is "33.33".
function percentOf(fractions) {
  const [ip, fp = ''] = sumMoney(fractions).split('.');
  const digits = (ip + fp.padEnd(2, '0')).replace(/^0+(?=\d)/, '');
  const whole = digits.slice(0, digits.length - (fp.length - 2)) || '0';
  const rest = fp.slice(2).replace(/0+$/, '');
  return rest ? `${whole}.${rest}` : whole;
}

function shortID(id) {
  return id.length > 20 ? id.slice(0, 12) + '…' + id.slice(-4) : id;
}

// ---------------------------------------------------------------- invoices

async function invoicesPage(ctx) {
  if (ctx.route.rest[0]) return invoicePage(ctx, ctx.route.rest[0]);
  const { view, session, route } = ctx;
  const period = await periodOf(ctx, 'invoices');
  if (!ctx.isCurrent()) return;
  const page = await getAll('/api/v1/invoices', { period: period === 'all' ? '' : period }, 200);
  if (!ctx.isCurrent()) return;
  // A month's totals come from its summary (the server adds them from the
  // documents); every period at once reads the documents themselves.
  const fin = period === 'all' ? null : await periodFinance(ctx, period);
  if (!ctx.isCurrent()) return;
  const docs = fin ? null : await documents(page.items);
  if (!ctx.isCurrent()) return;
  const totalOf = (i) => (fin ? fin.totalOf(i) : docs.get(i.id)?.total ?? '0');
  const curOf = (i) => (fin ? fin.currencyOf(i) : docs.get(i.id)?.currency) || session.currency;
  const out = [
    sectionHead(t('inv.title')),
    h('div', { class: 'controls' }, periodForm(ctx, 'invoices', period, {}, true)),
    tzNote(),
  ];
  if (page.items.length === 0) out.push(h('p', {}, t('none')));
  else {
    out.push(table(t('inv.caption'), [
      ...(fin?.select ? [fin.select] : []),
      { label: t('inv.project'), value: (i) => i.project },
      ...(fin ? [{ label: t('inv.funding'), value: (i) => fin.fundingOf(i) }] : []),
      { label: t('inv.period'), value: (i) => i.period },
      { label: t('inv.revision'), num: true, value: (i) => i.revision },
      { label: t('inv.status'), value: (i) => badge(i.status, statusText(i.status)) },
      { label: t('inv.number'), value: (i) => i.number || '—' },
      { label: t('inv.total'), num: true, value: (i) => (i.status === 'void' ? h('s', {}, money(totalOf(i), curOf(i))) : money(totalOf(i), curOf(i))) },
      { label: t('inv.updated'), value: (i) => time(i.updated_at) },
      { label: '', value: (i) => h('a', { href: `#/invoices/${i.id}`, class: 'button-link', 'aria-label': t('inv.openLabel', i) }, t('inv.open')) },
    ], page.items, { id: 'invoice-list' }));
    const sum = invoiceTotals(page.items, totalOf);
    const cur = session.currency || curOf(page.items[0]);
    out.push(h('p', { id: 'invoice-list-total' }, h('strong', {}, t('inv.listTotal', { n: sum.n, total: money(sum.total, cur),
      drafts: money(sum.drafts, cur), finalized: money(sum.finalized, cur) }))));
  }
  if (fin && page.items.length) out.push(...fin.sections);
  if (FINANCE.includes(session.me.role) && period !== 'all' && page.items.some((i) => i.status === 'finalized')) {
    out.push(h('p', { class: 'actions' }, t('inv.exportPeriod', { period }), ' ',
      ['csv', 'xlsx'].map((f) => exportButton(ctx, `/api/v1/periods/${period}/export`, f, `export-period-${f}`))));
  }
  view.replaceChildren(...out);
}

// exportButton downloads path in format (with query, the request's other
// parameters); label names it for assistive technology.
export function exportButton(ctx, path, format, id, query = {}, label = undefined) {
  const b = h('button', { type: 'button', class: 'secondary', id, 'aria-label': label }, format.toUpperCase());
  b.addEventListener('click', async () => {
    b.disabled = true;
    try {
      const name = await download(path, { ...query, format });
      ctx.say(t('inv.downloaded', { file: name }));
    } catch (e) {
      ctx.say(errorText(e));
    } finally {
      b.disabled = false;
    }
  });
  return b;
}

function dl(pairs) {
  return h('dl', { class: 'facts' }, pairs.filter(([, v]) => v !== undefined && v !== '' && v !== null)
    .map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

async function invoicePage(ctx, id) {
  const { view, session } = ctx;
  const inv = await get(`/api/v1/invoices/${encodeURIComponent(id)}`);
  if (!ctx.isCurrent()) return;
  const doc = inv.document || {};
  const cur = doc.currency || session.currency;
  const isFinance = FINANCE.includes(session.me.role);
  const actions = h('div', { class: 'actions', id: 'invoice-actions' },
    h('span', {}, t('inv.export')),
    ['csv', 'xlsx', 'pdf'].map((f) => exportButton(ctx, `/api/v1/invoices/${inv.id}/export`, f, `export-${f}`)));
  if (isFinance && inv.status === 'draft' && inv.finalizable_from && !inv.finalizable) {
    // The grace period runs: say when finalizing opens instead of offering it.
    actions.append(h('span', { id: 'finalize-wait', class: 'muted' }, t('inv.finalizeFrom', { time: time(inv.finalizable_from) })));
  } else if (isFinance && inv.status === 'draft' && inv.approval_required && !inv.approved_by) {
    // The lead's sign-off is required and not given for this document.
    actions.append(h('span', { id: 'finalize-wait-approval', class: 'muted' }, t('inv.awaitingApproval')));
  } else if (isFinance && inv.status === 'draft') {
    const b = h('button', { type: 'button', id: 'finalize' }, t('inv.finalize'));
    b.addEventListener('click', async () => {
      if (!confirm(t('inv.finalizeConfirm', { project: inv.project, period: inv.period, total: money(doc.total, cur) }))) return;
      b.disabled = true;
      try {
        const done = await post(`/api/v1/invoices/${inv.id}/finalize`, { if_sha256: inv.sha256 });
        ctx.say(t('inv.finalizedOk', { number: done.number }));
        ctx.go('invoices', null, [String(done.id)]);
      } catch (e) {
        ctx.say(errorText(e));
        b.disabled = false;
      }
    });
    actions.append(b);
  }
  if (isFinance && inv.status === 'finalized') {
    actions.append(...voidControl(ctx, inv));
  }
  actions.append(...approveControl(ctx, inv, money(doc.total, cur)));
  const hoursOf = (ms) => hours(Number(ms || 0) / 1000);
  const out = [
    h('p', {}, h('a', { href: `#/invoices?period=${inv.period}` }, t('inv.back'))),
    sectionHead(t('inv.heading', inv), badge(inv.status, statusText(inv.status))),
    dl([
      [t('inv.projectName'), doc.name ? h('span', { id: 'invoice-project-name' }, doc.name) : ''],
      [t('inv.funding'), doc.funding ? h('span', { id: 'invoice-funding' }, doc.funding) : ''],
      [t('inv.number'), inv.number],
      [t('inv.total'), h('strong', { id: 'invoice-total' }, money(doc.total, cur))],
      [t('inv.cutoff'), time(inv.data_cutoff)],
      [t('inv.catalog'), String(inv.catalog_version)],
      [t('inv.created'), `${time(inv.created_at)} · ${inv.created_by}`],
      [t('inv.approval'), !inv.approval_required ? '' : h('span', { id: 'invoice-approval' },
        inv.approved_by ? `${time(inv.approved_at)} · ${inv.approved_by}` : t('inv.awaitingApproval'))],
      [t('inv.finalized'), inv.finalized_at ? `${time(inv.finalized_at)} · ${inv.finalized_by}` : ''],
      [t('inv.voided'), inv.voided_at ? `${time(inv.voided_at)} · ${inv.voided_by}` : ''],
      [t('inv.reason'), inv.void_reason],
      [t('inv.sha'), h('code', { class: 'wrap' }, inv.sha256)],
    ]),
    actions,
    tzNote(),
    h('h2', {}, t('inv.lines')),
    table(t('inv.lines'), [
      { label: t('inv.kind'), value: (l) => kindCell(l, cur) },
      { label: t('inv.user'), value: (l) => l.user },
      { label: t('inv.sku'), value: (l) => l.sku },
      { label: t('inv.sessions'), num: true, value: (l) => l.sessions },
      { label: t('inv.billed'), num: true, value: (l) => hours(l.billed_seconds) },
      { label: t('inv.idle'), num: true, value: (l) => (l.kind === 'usage' ? hoursOf(l.idle_ms) : '') },
      { label: t('inv.unit'), num: true, value: (l) => money(l.unit_price, cur) },
      { label: t('inv.amount'), num: true, value: (l) => money(l.amount, cur) },
    ], doc.lines || [], { id: 'invoice-lines' }),
  ];
  if ((doc.students || []).length) {
    out.push(h('h2', {}, t('inv.students')), table(t('inv.students'), [
      { label: t('inv.user'), value: (s) => s.user },
      { label: t('inv.name'), value: (s) => s.name || '' },
      { label: t('inv.sessions'), num: true, value: (s) => s.sessions },
      { label: t('inv.total'), num: true, value: (s) => money(s.total, cur) },
    ], doc.students, { id: 'invoice-students' }));
  }
  if ((doc.unpriced || []).length) {
    out.push(h('h2', {}, t('inv.unpricedT')), table(t('inv.unpricedT'), [
      { label: t('inv.user'), value: (u) => u.user },
      { label: t('inv.model'), value: (u) => u.gpu_model },
      { label: t('inv.profile'), value: (u) => u.profile },
      { label: t('inv.usedHours'), num: true, value: (u) => hoursOf(u.used_ms) },
    ], doc.unpriced));
  }
  if ((doc.releases || []).length) {
    out.push(h('h2', {}, t('inv.releases')), h('ul', { id: 'invoice-releases' }, doc.releases.map((r) => h('li', {},
      t(r.status === 'failed' ? 'inv.relFailed' : 'inv.relDone', { user: r.user || '—', instance: r.instance_id, since: time(r.idle_since),
        at: time(r.at), action: r.action || '', failure: r.failure || '' })))));
  }
  if ((doc.warnings || []).length) {
    out.push(h('h2', {}, t('inv.warnings')), h('ul', { class: 'warnings' }, doc.warnings.map((w) => h('li', {}, h('code', {}, w.code), ' ', w.message))));
  }
  view.replaceChildren(...out);
}

// TERM_MONTHS are the months of a reservation's term.
const TERM_MONTHS = { month: 1, quarter: 3, year: 12 };

function addMonths(ym, n) {
  const [y, m] = ym.split('-').map(Number);
  const k = y * 12 + (m - 1) + n;
  return `${Math.floor(k / 12)}-${String((k % 12) + 1).padStart(2, '0')}`;
}

// ratePercent is a discount rate (the document's fraction, "0.05") as
// percent off and as the Chinese 折 that pays the rest (8 折 is 20 % off,
// 95 折 is 5 % off): a display of a rate, not money.
function ratePercent(rate) {
  const bp = Math.round(Number(rate) * 10000); // basis points off
  const rest = 10000 - bp;
  return { pct: String(bp / 100), zhe: String(rest % 1000 === 0 ? rest / 1000 : rest / 100) };
}

// kindCell is a line's kind; a reservation line also says its term,
// quantity, payment and months, and what its amount is made of as the
// document records it: the list amount (monthly price × months charged ×
// quantity), the discount rate (the term's or the SKU's) and amount, or, on
// an upfront reservation's later months, the invoice that prepaid it.
// Documents stored before the discount was recorded show the term only.
function kindCell(l, cur) {
  if (l.kind !== 'reservation') return t('kind.' + l.kind);
  const months = TERM_MONTHS[l.term];
  const bits = [];
  if (months && l.start) {
    bits.push(t('inv.resvTerm', { term: t('term.' + l.term), quantity: l.quantity || 0, billing: t('billing.' + (l.billing || 'monthly')),
      start: l.start, end: addMonths(l.start, months - 1) }));
  }
  if (l.discount_rate !== undefined && l.list_amount !== undefined && l.discount_amount !== undefined) {
    if (l.prepaid_in) {
      bits.push(h('span', { class: 'resv-prepaid' }, t('inv.resvPrepaid', { period: l.prepaid_in })));
    } else {
      bits.push(h('span', { class: 'resv-list' }, t('inv.resvList', { list: money(l.list_amount, cur), price: money(l.unit_price, cur),
        months: l.months_charged || 0, quantity: l.quantity || 0 })));
    }
    const r = ratePercent(l.discount_rate);
    bits.push(h('span', { class: 'resv-discount' }, Number(l.discount_rate) === 0
      ? t('inv.resvNoDiscount')
      : t('inv.resvDiscount', { pct: r.pct, zhe: r.zhe, discount: money(l.discount_amount, cur) })));
  }
  return [t('kind.reservation'), ...bits.map((b) => [h('br'), h('small', { class: 'resv' }, b)])];
}

function voidControl(ctx, inv) {
  const open = h('button', { type: 'button', id: 'void', class: 'danger' }, t('inv.void'));
  const reason = h('textarea', { id: 'void-reason', required: true, rows: 3, maxlength: 2000 });
  const err = h('p', { class: 'error', role: 'alert' });
  const cancel = h('button', { type: 'button', class: 'secondary' }, t('inv.cancel'));
  const form = h('form', { method: 'dialog' },
    h('h2', { id: 'void-title' }, t('inv.voidTitle', { number: inv.number })),
    h('p', {}, t('inv.voidHelp')),
    h('label', { for: 'void-reason' }, t('inv.voidReason')), reason, err,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'danger', id: 'void-confirm' }, t('inv.void')), cancel));
  const dialog = h('dialog', { 'aria-labelledby': 'void-title' }, form);
  open.addEventListener('click', () => { dialog.showModal(); reason.focus(); });
  cancel.addEventListener('click', () => dialog.close());
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    if (!reason.value.trim()) { reason.focus(); return; }
    try {
      const v = await post(`/api/v1/invoices/${inv.id}/void`, { reason: reason.value.trim() });
      dialog.close();
      ctx.say(t('inv.voidOk', { credit: v.credit_note.number, revision: v.draft.revision }));
      ctx.go('invoices', null, [String(v.draft.id)]);
    } catch (ex) {
      err.textContent = errorText(ex);
    }
  });
  return [open, dialog];
}

// ---------------------------------------------------------------- billing runs

// qualityTable shows one list of the data-quality report; known columns are
// named and formatted, others shown as they come.
function qualityTable(caption, rows) {
  const cols = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const cell = (c, v) => {
    if (v === null || v === undefined || v === '') return '—';
    if (c === 'time_ms') return time(new Date(v).toISOString());
    if (c === 'seconds') return hours(v);
    if (typeof v === 'string' && /^\d{4}-\d{2}-\d{2}T/.test(v)) return time(v);
    return typeof v === 'object' ? JSON.stringify(v) : String(v);
  };
  return table(caption, cols.map((c) => ({ label: label('dq.col.' + c, c), num: c === 'seconds', value: (r) => cell(c, r[c]) })), rows);
}

// label is the text of key, or fallback when there is none.
function label(key, fallback) {
  const s = t(key);
  return s === key ? fallback : s;
}

async function runsPage(ctx) {
  const { view, session, route } = ctx;
  const period = await periodOf(ctx, 'runs');
  if (!ctx.isCurrent()) return;
  const input = h('input', { type: 'month', id: 'run-period', required: true, value: period });
  const button = h('button', { type: 'submit', id: 'run' }, t('runs.run'));
  const result = h('div', { id: 'run-result' });
  const form = h('form', { class: 'inline' }, h('label', { for: 'run-period' }, t('period')), input, button);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    button.disabled = true;
    result.replaceChildren(h('p', {}, t('loading')));
    try {
      const rep = await post('/api/v1/billing-runs', { period: input.value });
      sessionStorage.setItem('cardhour.lastRun', JSON.stringify(rep));
      showRun(result, rep, session);
    } catch (ex) {
      result.replaceChildren(h('p', { class: 'error', role: 'alert' }, errorText(ex)));
    } finally {
      button.disabled = false;
    }
  });
  view.replaceChildren(sectionHead(t('runs.title')), h('p', {}, t('runs.help')), form, tzNote(), result);
  const last = sessionStorage.getItem('cardhour.lastRun');
  if (last) {
    showRun(result, JSON.parse(last), session);
    result.prepend(h('p', { class: 'muted' }, t('runs.last')));
  }
}

function showRun(el, rep, session) {
  const cur = session.currency;
  const out = [h('h2', {}, t('runs.result', { id: rep.id, period: rep.period, cutoff: time(rep.data_cutoff) }),
    rep.month_to_date ? [' ', badge('draft', t('runs.mtd'))] : null)];
  out.push(h('h3', {}, t('runs.drafts')), table(t('runs.drafts'), [
    { label: t('inv.project'), value: (d) => h('a', { href: `#/invoices/${d.invoice_id}` }, d.project) },
    { label: t('inv.revision'), num: true, value: (d) => d.revision },
    { label: t('inv.total'), num: true, value: (d) => money(d.total, cur) },
    { label: t('inv.sha'), value: (d) => h('code', {}, d.sha256.slice(0, 12) + '…') },
  ], rep.drafts || [], { id: 'run-drafts' }));
  if ((rep.kept || []).length) {
    out.push(h('h3', {}, t('runs.kept')), table(t('runs.kept'), [
      { label: t('inv.project'), value: (d) => h('a', { href: `#/invoices/${d.invoice_id}` }, d.project) },
      { label: t('inv.number'), value: (d) => d.number },
      { label: t('inv.revision'), num: true, value: (d) => d.revision },
    ], rep.kept));
  }
  if ((rep.diffs || []).length) {
    out.push(h('h3', {}, t('runs.diffs')), table(t('runs.diffs'), [
      { label: t('inv.project'), value: (d) => d.project },
      { label: t('inv.number'), value: (d) => d.number },
      { label: t('runs.old'), num: true, value: (d) => money(d.old_total, cur) },
      { label: t('runs.new'), num: true, value: (d) => money(d.new_total, cur) },
      { label: t('runs.delta'), num: true, value: (d) => money(d.delta, cur) },
      { label: t('runs.action'), value: (d) => d.action },
    ], rep.diffs));
  }
  if ((rep.unpriced || []).length) {
    out.push(h('h3', {}, t('runs.unpriced')), table(t('runs.unpriced'), [
      { label: t('inv.project'), value: (u) => u.project },
      { label: t('inv.user'), value: (u) => u.user },
      { label: t('inv.model'), value: (u) => u.gpu_model },
      { label: t('inv.profile'), value: (u) => u.profile },
      { label: t('inv.usedHours'), num: true, value: (u) => hours(u.used_seconds) },
    ], rep.unpriced));
  }
  if ((rep.warnings || []).length) {
    out.push(h('h3', {}, t('runs.warnings')), h('ul', { class: 'warnings' }, rep.warnings.map((w) => h('li', {}, w))));
  }
  const q = rep.data_quality;
  if (q) {
    const section = h('section', { id: 'run-quality' }, h('h3', {}, t('runs.quality')));
    const scalars = Object.entries(q).filter(([, v]) => v !== null && typeof v !== 'object');
    section.append(dl(scalars.map(([k, v]) => [label('dq.' + k, k), /^\d{4}-\d{2}-\d{2}T/.test(String(v)) ? time(v) : String(v)])));
    for (const [k, v] of Object.entries(q)) {
      if (v !== null && !Array.isArray(v)) continue; // scalars are above
      const name = label('dq.' + k, k);
      if (!v || v.length === 0) section.append(h('p', {}, `${name}: ${t('dq.none')}`));
      else section.append(h('h4', {}, `${name} (${v.length})`), qualityTable(name, v));
    }
    out.push(section);
  }
  el.replaceChildren(...out);
}

// ---------------------------------------------------------------- roster

async function rosterPage(ctx) {
  const { view, session, route } = ctx;
  const role = session.me.role;
  let project = session.me.project || route.params.get('project') || '';
  const out = [sectionHead(t('roster.title'))];
  if (!session.me.project) {
    const projects = (await get('/api/v1/projects')).items;
    if (!ctx.isCurrent()) return;
    project ||= projects[0]?.id || '';
    const sel = h('select', { id: 'roster-project' }, projects.map((p) => h('option', { value: p.id, selected: p.id === project }, p.name ? `${p.id} — ${p.name}` : p.id)));
    const form = h('form', { class: 'inline' }, h('label', { for: 'roster-project' }, t('roster.project')), sel, h('button', { type: 'submit' }, t('apply')));
    form.addEventListener('submit', (e) => { e.preventDefault(); ctx.go('roster', { project: sel.value }); });
    out.push(form);
  } else {
    out.push(h('p', {}, `${t('roster.project')}: ${project}`));
  }
  if (!project) {
    view.replaceChildren(...out, h('p', {}, t('none')));
    return;
  }
  const rows = (await getAll(`/api/v1/projects/${encodeURIComponent(project)}/students`)).items;
  if (!ctx.isCurrent()) return;
  out.push(rows.length === 0 ? h('p', {}, t('none')) : table(t('roster.title') + ' ' + project, [
    { label: t('roster.user'), value: (s) => s.user },
    { label: t('roster.name'), value: (s) => s.name },
    { label: t('roster.email'), value: (s) => s.email || '' },
    { label: t('roster.im'), value: (s) => s.im || '' },
  ], rows, { id: 'roster', rowHeader: true }));
  if (role === 'admin' || role === 'lead') out.push(rosterImport(ctx, project));
  view.replaceChildren(...out);
}

function rosterImport(ctx, project) {
  const file = h('input', { type: 'file', id: 'roster-file', accept: '.csv,text/csv', required: true });
  const res = h('div', { role: 'status' });
  const form = h('form', { class: 'card' },
    h('h2', {}, t('roster.import')), h('p', { class: 'muted' }, t('roster.importHelp')),
    h('label', { for: 'roster-file' }, 'CSV'), file, h('button', { type: 'submit' }, t('roster.upload')), res);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const f = file.files[0];
    if (!f) return;
    try {
      const r = await request('POST', `/api/v1/projects/${encodeURIComponent(project)}/roster`, { body: await f.text(), contentType: 'text/csv' });
      ctx.say(t('roster.imported', r));
      ctx.go('roster', { project, imported: Date.now() });
    } catch (ex) {
      const errs = ex instanceof ApiError ? ex.problem?.errors || [] : [];
      res.replaceChildren(h('p', { class: 'error', role: 'alert' }, t('roster.problems'), ' ', errorText(ex)),
        ...(errs.length ? [h('ul', {}, errs.map((p) => h('li', {}, [p.line ? `line ${p.line}` : '', p.field, p.message].filter(Boolean).join(': '))))] : []));
    }
  });
  return form;
}

// ---------------------------------------------------------------- statements

// A student's statements: the invoices of their project on which they have
// lines (GET /api/v1/statements), each opened as the statement itself.
async function statementsPage(ctx) {
  if (ctx.route.rest[0]) return statementPage(ctx, ctx.route.rest[0]);
  const { view, session, route } = ctx;
  const period = route.params.get('period') || 'all';
  const page = await getAll('/api/v1/statements', { period: period === 'all' ? '' : period }, 200);
  if (!ctx.isCurrent()) return;
  const out = [
    sectionHead(t('st.title')),
    h('div', { class: 'controls' }, periodForm(ctx, 'statements', period, {}, true)),
    h('p', { class: 'muted' }, t('st.help')),
  ];
  if (page.items.length === 0) out.push(h('p', {}, t('none')));
  else {
    out.push(table(t('st.caption'), [
      { label: t('inv.period'), value: (i) => i.period },
      { label: t('inv.status'), value: (i) => badge(i.status, statusText(i.status)) },
      { label: t('inv.number'), value: (i) => i.number || '—' },
      { label: t('inv.total'), num: true, value: (i) => money(i.total, session.currency) },
      { label: '', value: (i) => h('a', { href: `#/statements/${i.invoice_id}`, class: 'button-link', 'aria-label': t('st.openLabel', i) }, t('inv.open')) },
    ], page.items, { id: 'statement-list' }));
  }
  view.replaceChildren(...out);
}

async function statementPage(ctx, id) {
  const { view, session } = ctx;
  const user = session.me.user;
  const st = await get(`/api/v1/invoices/${encodeURIComponent(id)}/statements/${encodeURIComponent(user)}`);
  if (!ctx.isCurrent()) return;
  const doc = st.document || {};
  const cur = doc.currency || session.currency;
  const base = `/api/v1/invoices/${st.invoice_id}/statements/${encodeURIComponent(user)}/export`;
  view.replaceChildren(
    h('p', {}, h('a', { href: '#/statements' }, t('st.back'))),
    sectionHead(t('st.heading', st), badge(st.status, statusText(st.status))),
    dl([
      [t('inv.number'), doc.number],
      [t('inv.total'), h('strong', { id: 'statement-total' }, money(doc.total, cur))],
    ]),
    h('div', { class: 'actions', id: 'statement-actions' }, h('span', {}, t('inv.export')),
      ['csv', 'xlsx', 'pdf'].map((f) => exportButton(ctx, base, f, `statement-export-${f}`))),
    tzNote(),
    table(t('inv.lines'), [
      { label: t('inv.kind'), value: (l) => kindCell(l, cur) },
      { label: t('inv.sku'), value: (l) => l.sku },
      { label: t('inv.sessions'), num: true, value: (l) => l.sessions },
      { label: t('inv.billed'), num: true, value: (l) => hours(l.billed_seconds) },
      { label: t('inv.idle'), num: true, value: (l) => (l.kind === 'usage' ? hours(Number(l.idle_ms || 0) / 1000) : '') },
      { label: t('inv.unit'), num: true, value: (l) => money(l.unit_price, cur) },
      { label: t('inv.amount'), num: true, value: (l) => money(l.amount, cur) },
    ], doc.lines || [], { id: 'statement-lines' }),
  );
}

// leave stops what a page of this module runs (the Now page's polling).
export function leave() { stopNow(); }

export const pages = { now: nowPage, invoices: invoicesPage, statements: statementsPage, runs: runsPage, roster: rosterPage };
