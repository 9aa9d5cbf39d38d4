// The usage page: a month (or any range of days) per day by project,
// student or SKU; month over month for the last twelve months; the top
// students and projects by cost, idle cost and card-hours. The engine
// groups, orders and prices everything (GET /api/v1/usage with group_by,
// order_by and limit); every table downloads as CSV or XLSX through
// GET /api/v1/usage/export with the same parameters as the request it shows.

import { get, getAll } from './api.js';
import { addDays, addMonths, h, hours, money, sumMoney, table, time, zonedStart } from './format.js';
import { getLang, t } from './i18n.js';
import { exportButton, invoiceTotals, periodForm, periodOf, sectionHead, tzNote } from './pages.js';

let echartsLoading;

// loadECharts adds the vendored library on first use (only this page needs it).
export function loadECharts() {
  if (window.echarts) return Promise.resolve(window.echarts);
  echartsLoading ??= new Promise((resolve, reject) => {
    const s = document.createElement('script');
    s.src = 'vendor/echarts-5.6.0.min.js';
    s.onload = () => resolve(window.echarts);
    s.onerror = () => { echartsLoading = undefined; reject(new Error(s.src)); };
    document.head.append(s);
  });
  return echartsLoading;
}

const charts = new Set();
window.addEventListener('resize', () => { for (const c of charts) c.resize(); });

function disposeCharts() {
  for (const c of charts) c.dispose();
  charts.clear();
}

// leave releases what the page holds (the chart instances) before the next one.
export function leave() { disposeCharts(); }

const TOP = 8; // series in a chart, the rest as "others"
const TOP_N = 10; // rows of a top list
const DATE = /^\d{4}-\d{2}-\d{2}$/;
const TOPS = ['cost', 'idle_cost', 'held_seconds', 'saved_cost'];

// rangeOf is the page's range: the route's dates (from and to, the last day
// included, in the catalog's zone) or its month (or the default month).
async function rangeOf(ctx) {
  const p = ctx.route.params;
  const from = p.get('from') || '', to = p.get('to') || '';
  if (DATE.test(from) && DATE.test(to)) {
    return { from, to, query: { from: zonedStart(from), to: zonedStart(addDays(to, 1)) }, end: to.slice(0, 7), label: t('usage.rangeText', { from, to }) };
  }
  const period = await periodOf(ctx, 'usage');
  // The month's days, for the date inputs to start from.
  return { period, query: { period }, end: period, label: period, from: period + '-01', to: addDays(addMonths(period, 1) + '-01', -1) };
}

// usageHref is the page's address with state changed.
function usageHref(state, change) {
  const s = { ...state, ...change };
  const q = new URLSearchParams(Object.entries(s).filter(([, v]) => v !== undefined && v !== ''));
  return '#/usage?' + q;
}

// seg is a group of links, one of them current.
function seg(label, values, current, href, text, id) {
  return h('div', { class: 'seg', role: 'group', 'aria-label': label, id },
    h('span', { class: 'seg-label' }, label),
    values.map((v) => h('a', { href: href(v), 'aria-current': v === current ? 'true' : undefined, class: 'seg-btn', 'data-value': v }, text(v))));
}

// rangeForm picks any range of days (both included) in the catalog's zone.
function rangeForm(ctx, range, keep) {
  const from = h('input', { type: 'date', id: 'range-from', name: 'from', required: true, value: range.from || '' });
  const to = h('input', { type: 'date', id: 'range-to', name: 'to', required: true, value: range.to || '' });
  const err = h('span', { class: 'error', role: 'alert', id: 'range-error' });
  const form = h('form', { class: 'inline', id: 'range-form' },
    h('label', { for: 'range-from' }, t('range.from')), from,
    h('label', { for: 'range-to' }, t('range.to')), to,
    h('button', { type: 'submit', id: 'range-apply' }, t('apply')), err);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (!DATE.test(from.value) || !DATE.test(to.value) || from.value > to.value) {
      err.textContent = t('range.bad');
      return;
    }
    ctx.go('usage', { ...keep, from: from.value, to: to.value });
  });
  return form;
}

// columns are the columns of a usage table (and of its export): a column
// per dimension, then hours and money; an empty SKU is unpriced usage.
function columns(dims, cur) {
  const keyText = (r, d) => r[d] || (d === 'sku' ? t('usage.unpricedKey') : '—');
  return [
    ...dims.map((d) => ({ label: t('col.' + d), value: (r) => keyText(r, d) })),
    { label: t('col.heldHours'), num: true, value: (r) => hours(r.held_seconds) },
    { label: t('col.idleHours'), num: true, value: (r) => hours(r.idle_seconds) },
    { label: t('col.busyHours'), num: true, value: (r) => hours(r.busy_seconds) },
    { label: t('col.efficiencyPct'), num: true, value: (r) => r.efficiency || '—' },
    { label: t('col.costCur', { cur }), num: true, value: (r) => money(r.cost, cur) },
    { label: t('col.idleCostCur', { cur }), num: true, value: (r) => money(r.idle_cost, cur) },
    { label: t('col.savedCostCur', { cur }), num: true, value: (r) => money(r.saved_cost, cur) },
  ];
}

// downloads are a table's download buttons: the export of query.
function downloads(ctx, id, caption, query) {
  return h('div', { class: 'actions downloads', id: id + '-downloads' }, h('span', {}, t('usage.download')),
    ['csv', 'xlsx'].map((f) => exportButton(ctx, '/api/v1/usage/export', f, `${id}-${f}`, { ...query, lang: getLang() },
      t('usage.downloadLabel', { table: caption, format: f.toUpperCase() }))));
}

// usageTable is a table of a report's rows with its download buttons; with
// total, the report's total row (the export's last row).
function usageTable(ctx, id, caption, rep, query, dims, cur, total) {
  return [
    table(caption, columns(dims, cur), rep.rows, { id, rowHeader: true, showCaption: true, scroll: rep.rows.length > 14,
      total: total ? rep.total : undefined, totalLabel: t('col.total') }),
    downloads(ctx, id, caption, query),
  ];
}

async function usagePage(ctx) {
  const { view, session, route } = ctx;
  disposeCharts();
  const role = session.me.role;
  const range = await rangeOf(ctx);
  if (!ctx.isCurrent()) return;
  const dims = role === 'student' ? ['sku', 'project'] : ['project', 'user', 'sku'];
  const p = route.params;
  const pick = (name, values) => (values.includes(p.get(name)) ? p.get(name) : values[0]);
  const dim = pick('by', dims);
  const measure = pick('measure', ['cost', 'hours']);
  const trend = pick('trend', ['project', 'sku']);
  const top = pick('top', TOPS);
  const state = { ...(range.period ? { period: range.period } : { from: range.from, to: range.to }), by: dim, measure, trend, top };
  const topDims = [role !== 'student' ? 'user' : null, role !== 'lead' ? 'project' : null].filter(Boolean);
  const mom = momRange(range.end);
  const q = {
    daily: { ...range.query, group_by: ['day', dim] },
    split: { ...range.query, group_by: [dim], order_by: measure === 'cost' ? 'cost' : 'held_seconds' },
    mom: { from: mom.query.from, to: mom.query.to, group_by: [trend, 'month'] },
    top: Object.fromEntries(topDims.map((d) => [d, { ...range.query, group_by: [d], order_by: top, limit: TOP_N }])),
  };
  const [daily, split, billed, momRep, ...tops] = await Promise.all([
    getAll('/api/v1/usage', q.daily),
    getAll('/api/v1/usage', q.split),
    range.period ? invoicedFor(role, range.period).catch(() => null) : null,
    getAll('/api/v1/usage', q.mom),
    ...topDims.map((d) => get('/api/v1/usage', q.top[d])),
    loadECharts().catch((e) => e),
  ]);
  if (!ctx.isCurrent()) return;
  const cur = daily.currency || session.currency;
  const value = (r) => (measure === 'cost' ? Number(r.cost) : r.held_seconds / 3600);
  const keep = { by: dim, measure, trend, top };
  const dimName = t('dim.' + dim);
  const mName = t('usage.' + measure);
  const total = daily.total || {};

  const byNav = seg(t('usage.by'), dims, dim, (d) => usageHref(state, { by: d }), (d) => t('dim.' + d));
  const mNav = seg(t('usage.measure'), ['cost', 'hours'], measure, (m) => usageHref(state, { measure: m }), (m) => t('usage.' + m));
  const chartDaily = h('div', { class: 'chart', id: 'chart-daily', role: 'img', 'aria-label': t('usage.chartLabel', { dim: dimName, measure: mName }) });
  const chartSplit = h('div', { class: 'chart chart-small', id: 'chart-split', role: 'img', 'aria-label': t('usage.chartLabel', { dim: dimName, measure: mName }) });
  const momSec = momSection(ctx, state, momRep, q.mom, mom, trend, measure, cur);
  const topSec = topSection(ctx, state, topDims, tops, q.top, top, range, cur);
  const out = [
    sectionHead(t('usage.title')),
    h('div', { class: 'controls' }, periodForm(ctx, 'usage', range.period || '', keep), rangeForm(ctx, range, keep)),
    h('div', { class: 'controls' }, byNav, mNav),
    h('p', { id: 'usage-total' }, h('strong', {}, t('usage.listTotal', { range: range.label, cost: money(total.cost, cur), hours: hours(total.held_seconds),
      idle: hours(total.idle_seconds), idleCost: money(total.idle_cost, cur) }))),
    h('p', { id: 'usage-savings' }, t('usage.savings', { range: range.label, cost: money(total.saved_cost, cur), hours: hours(total.saved_seconds) }),
      ' ', h('span', { class: 'muted' }, t('usage.savingsAssumption', { days: Math.round((daily.savings_horizon_seconds || 0) / 86400) }))),
    range.period ? invoicedNote(billed, range.period, total.cost, cur, role) : null,
    h('p', { class: 'muted', id: 'usage-list-help' }, t('usage.listHelp')),
    daily.unpriced_seconds ? h('p', { class: 'warn' }, t('usage.unpriced', { hours: hours(daily.unpriced_seconds) })) : null,
    tzNote(),
    h('div', { class: 'charts' },
      h('figure', {}, h('figcaption', {}, t('usage.daily', { dim: dimName })), chartDaily),
      h('figure', {}, h('figcaption', {}, t(range.period ? 'usage.split' : 'usage.splitRange', { dim: dimName })), chartSplit)),
    table(t('usage.tableCaption', { dim: dimName, period: range.label }), [
      ...columns([dim], cur),
      ...(dim === 'project' && billed?.byProject ? [{ label: t('col.invoiced'), num: true,
        value: (r) => (!r.project ? '' : r.project in billed.byProject ? money(billed.byProject[r.project], cur) : '—') }] : []),
    ], split.rows, { id: 'usage-table', rowHeader: true, showCaption: true, total: split.total, totalLabel: t('col.total') }),
    downloads(ctx, 'usage-table', t('usage.tableCaption', { dim: dimName, period: range.label }), q.split),
    momSec.el,
    topSec.el,
  ];
  view.replaceChildren(...out.filter(Boolean));
  const echarts = window.echarts;
  if (!echarts) {
    chartDaily.replaceWith(h('p', { class: 'error' }, t('usage.chartFailed', { detail: 'vendor/echarts-5.6.0.min.js' })));
    return;
  }
  drawDaily(echarts, chartDaily, daily, dim, value, measure, cur);
  drawSplit(echarts, chartSplit, split, dim, value, measure, cur, mName);
  momSec.draw(echarts);
}

// ---------------------------------------------------------------- charts

const round = (x) => Math.round(x * 100) / 100;

function fmtOf(measure, cur) {
  return (v) => (measure === 'cost' ? money(v.toFixed(2), cur) : `${v.toFixed(2)} h`);
}

function axisFmt(measure, cur) {
  return (v) => (measure === 'cost' ? money(Number(v).toFixed(2), cur) : v);
}

// stacked turns rows into chart series: the TOP keys by the measure over
// all buckets, the rest as "others", each a value per bucket (the daily
// chart's stacks: the numbers are in the table below it).
function stacked(rows, keyOf, bucketOf, buckets, value) {
  const sums = new Map();
  for (const r of rows) sums.set(keyOf(r), (sums.get(keyOf(r)) || 0) + value(r));
  const order = [...sums.keys()].sort((a, b) => sums.get(b) - sums.get(a) || a.localeCompare(b));
  const top = order.slice(0, TOP);
  const keys = order.length > TOP ? [...top, t('usage.others')] : top;
  const grid = Object.fromEntries(keys.map((k) => [k, Object.fromEntries(buckets.map((b) => [b, 0]))]));
  for (const r of rows) {
    const k = top.includes(keyOf(r)) ? keyOf(r) : t('usage.others');
    if (grid[k] && bucketOf(r) in grid[k]) grid[k][bucketOf(r)] += value(r);
  }
  return keys.map((k) => ({ name: k, type: 'bar', stack: 'total', emphasis: { focus: 'series' }, data: buckets.map((b) => round(grid[k][b])) }));
}

function barChart(echarts, el, buckets, series, measure, cur, label) {
  const c = echarts.init(el, null, { renderer: 'canvas' });
  c.setOption({
    animation: false,
    tooltip: { trigger: 'axis', valueFormatter: fmtOf(measure, cur) },
    legend: { type: 'scroll', top: 0 },
    grid: { left: 8, right: 16, top: 40, bottom: 8, containLabel: true },
    xAxis: { type: 'category', data: buckets, axisLabel: { formatter: label } },
    yAxis: { type: 'value', axisLabel: { formatter: axisFmt(measure, cur) } },
    series,
  });
  charts.add(c);
}

function drawDaily(echarts, el, daily, dim, value, measure, cur) {
  const days = [];
  const start = new Date(daily.from), end = new Date(daily.to);
  // Days of the range in the zone: step by 24 h from noon of the first day.
  for (let d = new Date(start.getTime() + 12 * 3600e3); d < end; d = new Date(d.getTime() + 24 * 3600e3)) {
    const day = time(d.toISOString()).slice(0, 10);
    if (!days.includes(day)) days.push(day);
  }
  const keyOf = (r) => r[dim] || '—';
  barChart(echarts, el, days, stacked(daily.rows, keyOf, (r) => r.day, days, value), measure, cur, (d) => d.slice(5));
}

function drawSplit(echarts, el, split, dim, value, measure, cur, mName) {
  const sorted = [...split.rows].reverse(); // largest at the top
  const c = echarts.init(el, null, { renderer: 'canvas' });
  c.setOption({
    animation: false,
    tooltip: { trigger: 'axis', axisPointer: { type: 'shadow' }, valueFormatter: fmtOf(measure, cur) },
    grid: { left: 8, right: 24, top: 8, bottom: 8, containLabel: true },
    xAxis: { type: 'value', splitNumber: 3, axisLabel: { formatter: axisFmt(measure, cur) } },
    yAxis: { type: 'category', data: sorted.map((r) => r[dim] || '—') },
    series: [{ name: mName, type: 'bar', data: sorted.map((r) => round(value(r))) }],
  });
  charts.add(c);
}

// ---------------------------------------------------------------- month over month

// momRange is the twelve months ending with the month end, in the zone.
function momRange(end) {
  const months = Array.from({ length: 12 }, (_, i) => addMonths(end, i - 11));
  return { months, query: { from: zonedStart(months[0] + '-01'), to: zonedStart(addMonths(end, 1) + '-01') } };
}

function momSection(ctx, state, rep, query, mom, trend, measure, cur) {
  const dimName = t('dim.' + trend);
  const from = mom.months[0], to = mom.months.at(-1);
  const caption = t('usage.momCaption', { dim: dimName, from, to });
  const chart = h('div', { class: 'chart', id: 'chart-mom', role: 'img', 'aria-label': t('usage.momChart', { dim: dimName, measure: t('usage.' + measure), from, to }) });
  const el = h('section', { id: 'usage-mom', 'aria-labelledby': 'usage-mom-title' },
    h('h2', { id: 'usage-mom-title' }, t('usage.mom', { from, to })),
    h('div', { class: 'controls' }, seg(t('usage.by'), ['project', 'sku'], trend, (d) => usageHref(state, { trend: d }), (d) => t('dim.' + d), 'mom-by')),
    h('figure', {}, h('figcaption', {}, t('usage.momFig', { dim: dimName, measure: t('usage.' + measure) })), chart),
    usageTable(ctx, 'mom-table', caption, rep, query, [trend, 'month'], cur, true));
  const value = (r) => (measure === 'cost' ? Number(r.cost) : r.held_seconds / 3600);
  return { el, draw: (echarts) => barChart(echarts, chart, mom.months, monthSeries(rep.rows, trend, mom.months, value), measure, cur, (m) => m) };
}

// monthSeries are the bars of a month-over-month report: a series per
// project (or SKU) in the report's order, each month's bar its row's value
// as the API gave it (one row per project and month: nothing is added up).
function monthSeries(rows, trend, months, value) {
  const series = new Map();
  for (const r of rows) {
    const k = r[trend] || t('usage.unpricedKey');
    if (!series.has(k)) series.set(k, months.map(() => 0));
    const i = months.indexOf(r.month);
    if (i >= 0) series.get(k)[i] = round(value(r));
  }
  return [...series].map(([name, data]) => ({ name, type: 'bar', stack: 'total', emphasis: { focus: 'series' }, data }));
}

// ---------------------------------------------------------------- top lists

function topSection(ctx, state, topDims, tops, queries, top, range, cur) {
  if (!topDims.length) return { el: null };
  const mName = t('usage.top.' + top);
  const el = h('section', { id: 'usage-top', 'aria-labelledby': 'usage-top-title' },
    h('h2', { id: 'usage-top-title' }, t('usage.top', { range: range.label })),
    h('div', { class: 'controls' }, seg(t('usage.topBy'), TOPS, top, (m) => usageHref(state, { top: m }), (m) => t('usage.top.' + m), 'top-by')),
    h('div', { class: 'tops' }, topDims.map((d, i) => {
      const caption = t(d === 'user' ? 'usage.topUsers' : 'usage.topProjects', { n: TOP_N, measure: mName });
      return h('div', { class: 'top-list' }, usageTable(ctx, 'top-' + d, caption, tops[i], queries[d], [d], cur, false));
    })));
  return { el };
}

// ---------------------------------------------------------------- invoiced

// invoicedFor is what the invoices of period bill (void revisions left
// out): staff read the period's summary (each invoice's total, added by the
// server from its document), a student its statements. By project for staff.
async function invoicedFor(role, period) {
  if (role === 'student') {
    const items = (await getAll('/api/v1/statements', { period }, 200)).items;
    return invoiceTotals(items, (i) => i.total);
  }
  const items = (await get(`/api/v1/periods/${period}/summary`)).invoices;
  const sum = invoiceTotals(items, (i) => i.total);
  sum.byProject = {};
  for (const i of items) if (i.status !== 'void') sum.byProject[i.project] = sumMoney([sum.byProject[i.project] ?? '0', i.total]);
  return sum;
}

function invoicedNote(billed, period, listCost, cur, role) {
  if (!billed) return null;
  const link = role === 'student'
    ? h('a', { href: '#/statements?period=' + period }, t('usage.statements'))
    : h('a', { href: '#/invoices?period=' + period }, t('usage.openInvoices', { period }));
  if (billed.n === 0) return h('p', { id: 'usage-invoiced' }, t('usage.invoicedNone', { period }), ' ', link);
  const delta = sumMoney([billed.total, '-' + String(listCost ?? '0').replace(/^-/, '')]);
  return h('p', { id: 'usage-invoiced' }, h('strong', {}, t('usage.invoiced', { period, total: money(billed.total, cur), drafts: billed.nDrafts, finalized: billed.nFinalized })),
    ' ', t('usage.invoicedDiff', { delta: money(delta, cur) }), ' ', link);
}

export const usagePages = { usage: usagePage };
