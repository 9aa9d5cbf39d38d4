// Formatting and DOM helpers. Money arrives as decimal strings and is shown
// from those strings (grouped, never through floating point); times are
// shown in the catalog's time zone.

import { getLang, t } from './i18n.js';

// h builds an element: h('td', {class: 'num'}, 'text', child, …). Strings
// become text nodes, so data from the API is never parsed as HTML.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

const symbols = {};

// currencySymbol is the narrow symbol of an ISO 4217 code (CNY → ¥).
export function currencySymbol(code) {
  if (!code) return '';
  if (!(code in symbols)) {
    try {
      const parts = new Intl.NumberFormat('en', { style: 'currency', currency: code, currencyDisplay: 'narrowSymbol' }).formatToParts(0);
      symbols[code] = parts.find((p) => p.type === 'currency')?.value || code;
    } catch {
      symbols[code] = code;
    }
  }
  return symbols[code];
}

// group inserts thousands separators into a string of digits.
function group(digits) {
  return digits.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}

// money formats a decimal string like "1234.5" as "¥ 1,234.50".
export function money(value, currency) {
  let s = String(value ?? '0').trim();
  let neg = false;
  if (s.startsWith('-')) { neg = true; s = s.slice(1); }
  let [ip, fp = ''] = s.split('.');
  ip = ip.replace(/^0+(?=\d)/, '') || '0';
  fp = (fp + '00').slice(0, Math.max(2, fp.length));
  const sym = currencySymbol(currency);
  const num = group(ip) + '.' + fp;
  return (neg ? '-' : '') + (sym ? sym + '\u00a0' : '') + num;
}

// hours formats seconds as hours with two decimals ("1,234.56"), rounded
// half up exactly, as the server's exports do (billing.FormatHours): the
// hundredths of an hour are seconds / 36, computed without a fraction in
// floating point (54 s is 0.02 h, where 0.015 as a double rounds down).
export function hours(seconds) {
  const s = Number(seconds || 0);
  const c = Math.floor((2 * Math.abs(s) + 36) / 72);
  return (s < 0 && c > 0 ? '-' : '') + group(String(Math.floor(c / 100))) + '.' + String(c % 100).padStart(2, '0');
}

let zone;

export function setZone(tz) {
  try {
    new Intl.DateTimeFormat('en', { timeZone: tz });
    zone = tz;
  } catch {
    zone = undefined;
  }
}

export function getZone() {
  return zone || Intl.DateTimeFormat().resolvedOptions().timeZone;
}

function parts(d) {
  const f = new Intl.DateTimeFormat('en-GB', { timeZone: getZone(), year: 'numeric', month: '2-digit', day: '2-digit',
    hour: '2-digit', minute: '2-digit', hourCycle: 'h23' });
  const o = {};
  for (const p of f.formatToParts(d)) o[p.type] = p.value;
  return o;
}

// time formats an RFC 3339 string as "2026-11-18 16:29" in the zone.
export function time(v) {
  if (!v) return '';
  const d = new Date(v);
  if (Number.isNaN(d.getTime())) return String(v);
  const p = parts(d);
  return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}`;
}

// zoneOffset is the zone's UTC offset in milliseconds at instant ms.
function zoneOffset(ms) {
  const f = new Intl.DateTimeFormat('en-GB', { timeZone: getZone(), year: 'numeric', month: '2-digit', day: '2-digit',
    hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23' });
  const o = {};
  for (const p of f.formatToParts(new Date(ms))) o[p.type] = Number(p.value);
  return Date.UTC(o.year, o.month - 1, o.day, o.hour, o.minute, o.second) - Math.floor(ms / 1000) * 1000;
}

// zonedStart is the instant (RFC 3339, UTC) at which the local day
// YYYY-MM-DD starts in the zone, for the API's from and to.
export function zonedStart(date) {
  const [y, m, d] = date.split('-').map(Number);
  const guess = Date.UTC(y, m - 1, d);
  let at = guess - zoneOffset(guess);
  at = guess - zoneOffset(at); // the offset at the day's start, across a change
  return new Date(at).toISOString().replace('.000Z', 'Z');
}

// addDays is the date YYYY-MM-DD n days after date (a calendar's, no zone).
export function addDays(date, n) {
  const [y, m, d] = date.split('-').map(Number);
  return new Date(Date.UTC(y, m - 1, d + n)).toISOString().slice(0, 10);
}

// addMonths is the month YYYY-MM n months after ym.
export function addMonths(ym, n) {
  const [y, m] = ym.split('-').map(Number);
  const k = y * 12 + (m - 1) + n;
  return `${Math.floor(k / 12)}-${String((k % 12) + 1).padStart(2, '0')}`;
}

// thisMonth is the current month YYYY-MM in the zone.
export function thisMonth() {
  const p = parts(new Date());
  return `${p.year}-${p.month}`;
}

// duration formats milliseconds as "2 d 3 h", "3 h 4 min" or "5 min".
export function duration(ms) {
  const m = Math.max(0, Math.floor(ms / 60000));
  const d = Math.floor(m / 1440), hh = Math.floor((m % 1440) / 60), mm = m % 60;
  const zh = getLang() === 'zh-CN';
  const u = zh ? { d: ' 天', h: ' 小时', m: ' 分钟' } : { d: ' d', h: ' h', m: ' min' };
  if (d > 0) return `${d}${u.d} ${hh}${u.h}`;
  if (hh > 0) return `${hh}${u.h} ${mm}${u.m}`;
  return `${mm}${u.m}`;
}

// table builds an accessible table: caption, column headers with scope;
// with opts.total (a row) and opts.totalLabel, a total row in its footer,
// the label in the first column.
export function table(caption, columns, rows, opts = {}) {
  const head = h('tr', {}, columns.map((c) => h('th', { scope: 'col', class: c.num ? 'num' : undefined }, c.label)));
  const body = rows.map((r) => h('tr', {}, columns.map((c, i) => {
    const v = c.value(r);
    const attrs = { class: c.num ? 'num' : undefined };
    return i === 0 && opts.rowHeader ? h('th', { scope: 'row', ...attrs }, v) : h('td', attrs, v);
  })));
  const foot = opts.total ? h('tfoot', {}, h('tr', {}, columns.map((c, i) => (i === 0
    ? h('th', { scope: 'row' }, opts.totalLabel)
    : h('td', { class: c.num ? 'num' : undefined }, c.num ? c.value(opts.total) : ''))))) : null;
  return h('div', { class: 'table-wrap' + (opts.scroll ? ' table-scroll' : ''), tabindex: '0', role: 'region', 'aria-label': caption },
    h('table', { id: opts.id }, h('caption', { class: opts.showCaption ? undefined : 'vh' }, caption),
      h('thead', {}, head), h('tbody', {}, body), foot));
}

export function badge(kind, text) {
  return h('span', { class: 'badge badge-' + kind }, text);
}

export function statusText(s) {
  return t('status.' + s);
}

// sumMoney adds decimal strings exactly (as integers of their smallest
// fraction), and returns the sum as a decimal string with at least two
// places: money is never added in floating point.
export function sumMoney(values) {
  const list = values.map((v) => String(v ?? '0').trim() || '0');
  const scale = Math.max(2, ...list.map((v) => (v.split('.')[1] || '').length));
  let total = 0n;
  for (const v of list) {
    const neg = v.startsWith('-');
    const [ip, fp = ''] = v.replace(/^[-+]/, '').split('.');
    const n = BigInt((ip || '0') + fp.padEnd(scale, '0'));
    total += neg ? -n : n;
  }
  const neg = total < 0n;
  const digits = (neg ? -total : total).toString().padStart(scale + 1, '0');
  return (neg ? '-' : '') + digits.slice(0, -scale) + '.' + digits.slice(-scale);
}

// errorText is what the page says of a failed request, in the page's
// language: the kind of problem (its type), what to do, the fields named by
// a validation problem, and the request ID for the administrator's logs.
// The server's detail (English) is added on the English page only.
export function errorText(e) {
  const p = e?.problem || {};
  const kind = typeof p.type === 'string' ? p.type.replace(/^.*\/problems\//, '') : '';
  let msg;
  if (e?.status === undefined) {
    // Not an answer of the server: the network, or a fault of the page.
    return t('error', { detail: e?.name === 'TypeError' && /fetch/i.test(e.message) ? t('problem.network') : String(e?.message ?? e) });
  }
  if (kind && t('problem.' + kind) !== 'problem.' + kind) {
    const at = /(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}))/.exec(p.detail || '');
    const fields = (p.errors || []).map((x) => x.field || x.location).filter(Boolean);
    msg = t('problem.' + kind, { time: at ? time(at[1]) : '—', fields: fields.join(', ') || '—', status: e.status });
  } else {
    msg = t('problem.other', { status: e.status });
  }
  const detail = getLang() === 'en' && p.detail && !msg.includes(p.detail) ? ` (${p.detail})` : '';
  const rid = e?.requestId ? ' ' + t('problem.rid', { id: e.requestId }) : '';
  return t('error', { detail: msg + detail + rid });
}
