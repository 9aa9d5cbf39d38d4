// The efficiency page (admin, finance): occupancy per GPU model (held ÷
// sampled instance-hours, GET /api/v1/occupancy) and a heat map of each
// node's average utilisation per hour (GET /api/v1/utilization/heatmap),
// over a month or a range of days: at most 100 rows, the server grouping
// consecutive nodes when there are more; a group's row opens its nodes. The
// server computes every number (a group's too); the page formats them and
// paints the heat map's percentages (heatmap.js).

import { get } from './api.js';
import { addDays, addMonths, h, hours, table, time, zonedStart } from './format.js';
import { t } from './i18n.js';
import { periodForm, periodOf, sectionHead, tzNote } from './pages.js';
import { heatmap } from './heatmap.js';

const DATE = /^\d{4}-\d{2}-\d{2}$/;
let resize;

// leave forgets the heat map before the next page.
export function leave() {
  resize = undefined;
}
window.addEventListener('resize', () => resize?.());

// rangeOf is the route's days (from, to, both included) or its month.
async function rangeOf(ctx) {
  const p = ctx.route.params;
  const from = p.get('from') || '', to = p.get('to') || '';
  if (DATE.test(from) && DATE.test(to)) {
    return { from, to, query: { from: zonedStart(from), to: zonedStart(addDays(to, 1)) }, label: t('usage.rangeText', { from, to }) };
  }
  const period = await periodOf(ctx, 'efficiency');
  return { period, query: { period }, label: period, from: period + '-01', to: addDays(addMonths(period, 1) + '-01', -1) };
}

// rangeForm picks a range of days of at most 31 (the heat map's bound).
function rangeForm(ctx, range) {
  const from = h('input', { type: 'date', id: 'eff-from', required: true, value: range.from });
  const to = h('input', { type: 'date', id: 'eff-to', required: true, value: range.to });
  const err = h('span', { class: 'error', role: 'alert', id: 'eff-range-error' });
  const form = h('form', { class: 'inline', id: 'eff-range-form' },
    h('label', { for: 'eff-from' }, t('range.from')), from, h('label', { for: 'eff-to' }, t('range.to')), to,
    h('button', { type: 'submit', id: 'eff-range-apply' }, t('apply')), err);
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    if (!DATE.test(from.value) || !DATE.test(to.value) || from.value > to.value) {
      err.textContent = t('range.bad');
    } else if (addDays(from.value, 30) < to.value) {
      err.textContent = t('eff.tooLong');
    } else {
      ctx.go('efficiency', { from: from.value, to: to.value });
    }
  });
  return form;
}

const pct = (v) => v || '—';

function occupancyTable(occ, range) {
  return table(t('eff.occCaption', { range: range.label }), [
    { label: t('col.gpuModel'), value: (r) => r.gpu_model },
    { label: t('col.availHours'), num: true, value: (r) => hours(r.available_seconds) },
    { label: t('col.heldInstHours'), num: true, value: (r) => hours(r.held_seconds) },
    { label: t('col.occupancyPct'), num: true, value: (r) => pct(r.occupancy) },
  ], occ.rows, { id: 'occupancy-table', rowHeader: true, showCaption: true, total: occ.total, totalLabel: t('col.total') });
}

// NODES are the route's parameters that choose the heat map's nodes (and
// the most rows, 100 unless the route says).
const NODES = ['rows', 'node_prefix', 'node_from', 'node_to'];

// nodesOf is the route's choice of nodes (only those set).
function nodesOf(ctx) {
  const p = ctx.route.params;
  return Object.fromEntries(NODES.filter((k) => p.get(k)).map((k) => [k, p.get(k)]));
}

// rangeParams are the route's range (a month or days) and its rows, for
// links that keep them.
const rangeParams = (range) => ({ ...(range.period ? { period: range.period } : { from: range.from, to: range.to }), rows: range.rows });

// rowLabel names a heat map row: its node, or its first and last node and count.
const rowLabel = (r) => (r.nodes === 1 ? r.first : t('eff.groupLabel', { first: r.first, last: r.last, n: r.nodes }));

// drill opens one row's nodes.
const drill = (ctx, range, r) => ctx.go('efficiency', { ...rangeParams(range), node_from: r.first, node_to: r.last });

// utilText is a row's utilisation, or that it was held but not measured.
const utilText = (s) => s.util || (s.held_unmeasured_seconds > 0 ? t('eff.unmeasured') : '—');

function rowsTable(ctx, hm, range) {
  const label = (r) => (r.nodes === 1 ? r.first
    : h('a', { href: '#', 'data-first': r.first, onclick: (e) => { e.preventDefault(); drill(ctx, range, r); } }, rowLabel(r)));
  return table(t('eff.rowsCaption', { range: range.label }), [
    { label: t('col.nodes'), value: label },
    { label: t('col.nodeCount'), num: true, value: (r) => r.nodes },
    { label: t('col.heldInstHours'), num: true, value: (r) => hours(r.total.held_seconds) },
    { label: t('col.measuredHours'), num: true, value: (r) => hours(r.total.measured_seconds) },
    { label: t('col.utilPct'), num: true, value: (r) => utilText(r.total) },
  ], hm.rows, { id: 'heatmap-table', rowHeader: true, showCaption: true, scroll: hm.rows.length > 14 });
}

// nodesBar says how many nodes in how many rows, offers the rows' nodes by
// prefix, and leads back to every node from a choice.
function nodesBar(ctx, hm, range, chosen) {
  const prefix = h('input', { type: 'search', id: 'eff-prefix', value: chosen.node_prefix || '', placeholder: 'gpu-node-1' });
  const form = h('form', { class: 'inline', id: 'eff-prefix-form' },
    h('label', { for: 'eff-prefix' }, t('eff.prefix')), prefix, h('button', { type: 'submit' }, t('apply')));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    ctx.go('efficiency', { ...rangeParams(range), node_prefix: prefix.value.trim() });
  });
  const text = hm.group_size > 1
    ? t('eff.grouped', { nodes: hm.node_count, rows: hm.rows.length, size: hm.group_size })
    : t('eff.perNode', { nodes: hm.node_count });
  const all = NODES.slice(1).some((k) => chosen[k])
    ? h('a', { href: '#', id: 'eff-all-nodes', onclick: (e) => { e.preventDefault(); ctx.go('efficiency', rangeParams(range)); } }, t('eff.allNodes'))
    : null;
  return h('div', { class: 'controls' }, h('p', { id: 'eff-groups' }, text, ' ', all), form);
}

// heatmapFigure draws the rows: measured hours coloured by utilisation,
// held ones without a measurement in a grey of their own; a click on a
// group's row opens its nodes.
function heatmapFigure(hm, onRow) {
  const labels = hm.rows.map(rowLabel);
  const fig = heatmap({
    labels,
    hourLabels: hm.hours.map((v) => v.slice(5, 13).replace('T', ' ')),
    rows: hm.rows.map((r) => ({ util: r.util, unmeasured: r.held_unmeasured_seconds })),
    tip: (y, x) => {
      const r = hm.rows[y], u = r.util[x];
      return `${labels[y]} · ${time(hm.hours[x])} · ${u ? u + ' %' : r.held_unmeasured_seconds[x] > 0 ? t('eff.unmeasured') : '—'}`;
    },
    clickable: (y) => hm.rows[y].nodes > 1,
    onRow: (y) => onRow(hm.rows[y]),
    utilText: t('eff.util'),
    unmeasuredText: t('eff.unmeasured'),
  }, hm.rows.length > 40 ? 12 : 28);
  fig.el.id = 'chart-heatmap';
  fig.el.setAttribute('role', 'img');
  fig.el.setAttribute('aria-label', t('eff.heatLabel'));
  return fig;
}

export async function efficiencyPage(ctx) {
  leave();
  const range = await rangeOf(ctx);
  if (!ctx.isCurrent()) return;
  const chosen = nodesOf(ctx);
  range.rows = chosen.rows;
  const [occ, hm] = await Promise.all([
    get('/api/v1/occupancy', range.query),
    get('/api/v1/utilization/heatmap', { ...range.query, ...chosen }),
  ]);
  if (!ctx.isCurrent()) return;
  const fig = hm.rows.length ? heatmapFigure(hm, (r) => drill(ctx, range, r)) : null;
  ctx.view.replaceChildren(
    sectionHead(t('eff.title')),
    h('div', { class: 'controls' }, periodForm(ctx, 'efficiency', range.period || ''), rangeForm(ctx, range)),
    h('p', { class: 'muted', id: 'eff-help' }, t('eff.help')),
    tzNote(),
    occupancyTable(occ, range),
    nodesBar(ctx, hm, range, chosen),
    h('figure', {}, h('figcaption', {}, t('eff.heatCaption', { range: range.label })), fig ? fig.el : h('p', { class: 'muted' }, t('eff.none'))),
    rowsTable(ctx, hm, range),
  );
  if (fig) {
    fig.redraw();
    resize = fig.redraw;
  }
}
