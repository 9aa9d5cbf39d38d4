// The efficiency page (admin, finance): occupancy per GPU model (held ÷
// sampled instance-hours, GET /api/v1/occupancy) and a heat map of each
// node's average utilisation per hour (GET /api/v1/utilization/heatmap),
// over a month or a range of days. The server computes every number; the
// page formats them and plots the heat map's percentages.

import { get } from './api.js';
import { addDays, addMonths, h, hours, table, time, zonedStart } from './format.js';
import { t } from './i18n.js';
import { periodForm, periodOf, sectionHead, tzNote } from './pages.js';
import { loadECharts } from './usage.js';

const DATE = /^\d{4}-\d{2}-\d{2}$/;
let chart;

// leave releases the heat map's chart before the next page.
export function leave() {
  chart?.dispose();
  chart = undefined;
}
window.addEventListener('resize', () => chart?.resize());

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

// utilText is a cell's utilisation, or that it was held but not measured.
const utilText = (c) => c.util || (c.held_seconds > 0 ? t('eff.unmeasured') : '—');

function cellsTable(hm, range) {
  return table(t('eff.cellsCaption', { range: range.label }), [
    { label: t('col.nodeName'), value: (c) => c.node },
    { label: t('col.hourStart'), value: (c) => time(c.hour) },
    { label: t('col.heldInstHours'), num: true, value: (c) => hours(c.held_seconds) },
    { label: t('col.measuredHours'), num: true, value: (c) => hours(c.measured_seconds) },
    { label: t('col.utilPct'), num: true, value: utilText },
  ], hm.cells, { id: 'heatmap-table', rowHeader: true, showCaption: true, scroll: hm.cells.length > 14 });
}

// drawHeatmap plots the cells: measured ones coloured by utilisation, held
// ones without a measurement in a grey of their own.
function drawHeatmap(echarts, el, hm) {
  const x = new Map(hm.hours.map((v, i) => [v, i]));
  const y = new Map(hm.nodes.map((v, i) => [v, i]));
  const at = (c) => [x.get(c.hour), y.get(c.node)];
  const measured = hm.cells.filter((c) => c.util).map((c) => [...at(c), Number(c.util)]);
  const unmeasured = hm.cells.filter((c) => !c.util && c.held_seconds > 0).map((c) => [...at(c), 0]);
  chart = echarts.init(el, null, { renderer: 'canvas' });
  chart.setOption({
    animation: false,
    tooltip: { formatter: (p) => `${hm.nodes[p.data[1]]} · ${time(hm.hours[p.data[0]])}<br>${p.seriesIndex ? t('eff.unmeasured') : p.data[2] + ' %'}` },
    grid: { left: 8, right: 16, top: 48, bottom: 64, containLabel: true },
    xAxis: { type: 'category', data: hm.hours.map((v) => v.slice(5, 13).replace('T', ' ')), splitArea: { show: true } },
    yAxis: { type: 'category', data: hm.nodes, splitArea: { show: true } },
    visualMap: { min: 0, max: 100, seriesIndex: 0, calculable: true, orient: 'horizontal', left: 'center', bottom: 0, formatter: (v) => `${Math.round(v)} %` },
    legend: { top: 0, data: [{ name: t('eff.util'), itemStyle: { color: '#d94e5d' } }, t('eff.unmeasured')] },
    series: [
      { name: t('eff.util'), type: 'heatmap', data: measured },
      { name: t('eff.unmeasured'), type: 'heatmap', data: unmeasured, itemStyle: { color: '#9aa0a6', borderColor: '#fff', borderWidth: 1 } },
    ],
  });
}

export async function efficiencyPage(ctx) {
  leave();
  const range = await rangeOf(ctx);
  if (!ctx.isCurrent()) return;
  const [occ, hm] = await Promise.all([
    get('/api/v1/occupancy', range.query),
    get('/api/v1/utilization/heatmap', range.query),
    loadECharts().catch((e) => e),
  ]);
  if (!ctx.isCurrent()) return;
  const el = h('div', { class: 'chart', id: 'chart-heatmap', role: 'img', 'aria-label': t('eff.heatLabel'),
    style: `height: ${Math.max(240, 80 + 28 * hm.nodes.length)}px` });
  ctx.view.replaceChildren(
    sectionHead(t('eff.title')),
    h('div', { class: 'controls' }, periodForm(ctx, 'efficiency', range.period || ''), rangeForm(ctx, range)),
    h('p', { class: 'muted', id: 'eff-help' }, t('eff.help')),
    tzNote(),
    occupancyTable(occ, range),
    h('figure', {}, h('figcaption', {}, t('eff.heatCaption', { range: range.label })), hm.cells.length ? el : h('p', { class: 'muted' }, t('eff.none'))),
    cellsTable(hm, range),
  );
  if (!hm.cells.length) return;
  if (!window.echarts) {
    el.replaceWith(h('p', { class: 'error' }, t('usage.chartFailed', { detail: 'vendor/echarts-5.6.0.min.js' })));
    return;
  }
  drawHeatmap(window.echarts, el, hm);
}
