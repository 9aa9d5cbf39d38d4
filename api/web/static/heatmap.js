// A heat map drawn on one canvas: rows × hours of cells, each measured one
// coloured by its utilisation (0–100 %), a held one without a measurement
// in grey, the rest in a pale band. The server computes every figure; this only
// paints them, so that a month of 100 rows × 744 hours draws in
// milliseconds (a chart library's heat map took about a second). A pointer
// over a cell shows its row, hour and figure; a click on a row calls onRow.
// The canvas carries its geometry (data-left, data-top, data-cell-w,
// data-cell-h, in CSS pixels) for the browser tests that read its pixels.

import { h } from './format.js';

// STOPS are the colour scale's stops at 0, 50 and 100 %.
const STOPS = [[0xf6, 0xef, 0xa6], [0xd8, 0x82, 0x73], [0xbf, 0x44, 0x4c]];
export const UNMEASURED = '#9aa0a6';
const EMPTY = '#f1f3f4'; // an hour without a held or measured sample
const FONT = '11px system-ui, sans-serif';
const AXIS = 24; // room below the cells for the hours' labels

// utilColour is the scale's colour of a utilisation in percent.
export function utilColour(u) {
  const v = Math.min(100, Math.max(0, u)) / 50;
  const i = Math.min(1, Math.floor(v)), f = v - i;
  const c = STOPS[i].map((a, k) => Math.round(a + (STOPS[i + 1][k] - a) * f));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

// legend is the scale and the grey of held, unmeasured hours.
function legend(utilText, unmeasuredText) {
  const grad = `linear-gradient(to right, ${utilColour(0)}, ${utilColour(50)}, ${utilColour(100)})`;
  return h('div', { class: 'heat-legend' },
    h('span', {}, utilText), h('span', {}, '0 %'),
    h('span', { class: 'heat-scale', style: `background: ${grad}` }), h('span', {}, '100 %'),
    h('span', { class: 'heat-swatch', style: `background: ${UNMEASURED}` }), h('span', {}, unmeasuredText));
}

// drawCells paints the cells and the axes' labels at the canvas's size.
function drawCells(canvas, m, g) {
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(g.width * dpr);
  canvas.height = Math.round(g.height * dpr);
  canvas.style.width = g.width + 'px';
  canvas.style.height = g.height + 'px';
  const c = canvas.getContext('2d');
  c.setTransform(dpr, 0, 0, dpr, 0, 0);
  c.clearRect(0, 0, g.width, g.height);
  c.fillStyle = EMPTY; // each row's band, under its cells
  m.rows.forEach((r, y) => c.fillRect(g.left, g.top + y * g.cellH, Math.round(m.hourLabels.length * g.cellW), g.cellH - 1));
  m.rows.forEach((r, y) => r.util.forEach((u, x) => {
    if (u) c.fillStyle = utilColour(Number(u));
    else if (r.unmeasured[x] > 0) c.fillStyle = UNMEASURED;
    else return;
    // Whole pixels: no cell blends into its neighbour's colour.
    const x0 = Math.round(g.left + x * g.cellW), x1 = Math.round(g.left + (x + 1) * g.cellW);
    c.fillRect(x0, g.top + y * g.cellH, Math.max(x1 - x0, 1), g.cellH - 1);
  }));
  c.font = FONT;
  c.fillStyle = '#333';
  c.textBaseline = 'middle';
  c.textAlign = 'right';
  const every = Math.ceil(14 / g.cellH); // a label at least every 14 px
  m.labels.forEach((l, y) => { if (y % every === 0) c.fillText(l, g.left - 6, g.top + (y + 0.5) * g.cellH); });
  c.textAlign = 'center';
  c.textBaseline = 'top';
  const step = Math.max(1, Math.ceil(84 / g.cellW)); // a label at least every 84 px
  const base = g.top + m.rows.length * g.cellH + 6;
  for (let x = 0; x < m.hourLabels.length; x += step) c.fillText(m.hourLabels[x], g.left + (x + 0.5) * g.cellW, base);
}

// geometry places the cells in a box width wide, rowPx a row.
function geometry(canvas, m, width, rowPx) {
  const c = canvas.getContext('2d');
  c.font = FONT;
  const left = Math.ceil(Math.max(40, ...m.labels.map((l) => c.measureText(l).width))) + 10;
  const cellW = Math.max(0.5, (width - left - 16) / Math.max(1, m.hourLabels.length));
  return { left, top: 4, cellW, cellH: rowPx, width, height: 4 + rowPx * m.rows.length + AXIS };
}

// heatmap builds the figure's body, rowPx a row. m: labels (per row),
// hourLabels (per hour), rows ({util: ["37.5" | ""], unmeasured:
// [seconds]}), tip(y, x) the text of a cell, clickable(y) and onRow(y) a
// click on a row (optional), utilText and unmeasuredText the legend's
// words. It returns the element and redraw, which draws it at its box's
// width (once it is in the document, and on a resize).
export function heatmap(m, rowPx) {
  const canvas = h('canvas', { id: 'heatmap-canvas' });
  const tip = h('div', { class: 'heat-tip', role: 'status', hidden: true });
  const box = h('div', { class: 'heat-box' }, canvas, tip);
  let g;
  const redraw = () => {
    g = geometry(canvas, m, Math.max(320, box.clientWidth || 960), rowPx);
    drawCells(canvas, m, g);
    Object.assign(canvas.dataset, { left: g.left, top: g.top, cellW: g.cellW, cellH: g.cellH });
  };
  const cellAt = (e) => {
    const r = canvas.getBoundingClientRect();
    const x = Math.floor((e.clientX - r.left - g.left) / g.cellW), y = Math.floor((e.clientY - r.top - g.top) / g.cellH);
    return x >= 0 && y >= 0 && x < m.hourLabels.length && y < m.rows.length ? { x, y } : null;
  };
  canvas.addEventListener('mousemove', (e) => {
    const at = g && cellAt(e);
    tip.hidden = !at;
    if (!at) return;
    tip.textContent = m.tip(at.y, at.x);
    const r = canvas.getBoundingClientRect();
    tip.style.left = Math.min(e.clientX - r.left + 12, g.width - 220) + 'px';
    tip.style.top = (e.clientY - r.top + 12) + 'px';
    canvas.style.cursor = m.onRow && m.clickable(at.y) ? 'pointer' : 'default';
  });
  canvas.addEventListener('mouseleave', () => { tip.hidden = true; });
  canvas.addEventListener('click', (e) => {
    const at = g && cellAt(e);
    if (at && m.onRow && m.clickable(at.y)) m.onRow(at.y);
  });
  return { el: h('div', {}, legend(m.utilText, m.unmeasuredText), box), redraw };
}
