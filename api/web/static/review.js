// The monthly review (每月复盘, GET /api/v1/review): for a closed month, per
// project, what it cost (invoiced and at list price), what its idle time
// cost, how busy its held time was, its budgets at the month's end and the
// reservation advice and what the month's releases saved; exported for a
// lab lead as a PDF report, XLSX or CSV in the page's language
// (GET /api/v1/review/export). Every number is the API's, only formatted.

import { download, get } from './api.js';
import { errorText, h, hours, money, table } from './format.js';
import { getLang, t } from './i18n.js';


async function reviewPage(ctx) {
  const { view, route } = ctx;
  const asked = route.params.get('period') || '';
  const r = await get('/api/v1/review', asked ? { period: asked } : {});
  if (!ctx.isCurrent()) return;
  const cur = r.currency;
  const picker = h('input', { type: 'month', id: 'review-period', value: r.period });
  const show = h('button', { type: 'button', id: 'review-show' }, t('apply'));
  show.addEventListener('click', () => ctx.go('review', { period: picker.value }));
  const budgets = (x) => (x.budgets || []).map((b) => h('div', { 'data-budget': b.id },
    b.used === undefined || b.used === ''
      ? t('rev.budgetNotBilled', { limit: b.unit === 'money' ? money(b.limit, cur) : t('bud.hours', { n: b.limit }) })
      : t('rev.budget', { used: b.unit === 'money' ? money(b.used, cur) : t('bud.hours', { n: b.used }),
        limit: b.unit === 'money' ? money(b.limit, cur) : t('bud.hours', { n: b.limit }), percent: b.percent }),
    b.reached ? h('span', { class: 'badge badge-void' }, t('bud.reached')) : null));
  const cols = [
    { label: t('inv.project'), value: (x) => (x.project ? [x.project, x.name ? h('div', { class: 'muted small' }, x.name) : null] : h('strong', {}, t('rev.total'))) },
    { label: t('inv.funding'), value: (x) => x.funding || '' },
    { label: t('rev.invoiced'), num: true, value: (x) => (x.invoiced ? money(x.invoiced, cur) + (x.drafts ? ` (${t('rev.drafts', { n: x.drafts })})` : '') : t('rev.notBilled')) },
    { label: t('rev.listCost'), num: true, value: (x) => money(x.list_cost, cur) },
    { label: t('rev.idleCost'), num: true, value: (x) => money(x.idle_cost, cur) },
    { label: t('rev.held'), num: true, value: (x) => hours(x.held_seconds) },
    { label: t('rev.idle'), num: true, value: (x) => hours(x.idle_seconds) },
    { label: t('rev.efficiency'), num: true, value: (x) => (x.efficiency ? `${x.efficiency} %` : '—') },
    { label: t('rev.saved'), num: true, value: (x) => [money(x.saved_cost, cur), h('div', { class: 'muted small' }, t('bud.hours', { n: hours(x.saved_seconds) }))] },
    { label: t('rev.budgets'), value: (x) => budgets(x) },
    { label: t('rev.saving'), num: true, value: (x) => money(x.advice_saving, cur) },
  ];
  const rows = [...r.projects, r.total];
  const zh = getLang() === 'zh-CN';
  const advice = r.projects.filter((x) => (x.advice || []).length || (x.underused || []).length).map((x) => h('section', { class: 'card', 'data-advice': x.project },
    h('h3', {}, x.project),
    h('ul', {}, (x.advice || []).map((a) => h('li', {}, h('code', {}, a.sku), ' ', zh ? a.text['zh-CN'] : a.text.en)),
      (x.underused || []).map((u) => h('li', {}, t('rev.underused', { sku: u.sku, coverage: u.coverage, unused: money(u.unused, cur) }))))));
  const exportBtn = (f) => {
    const b = h('button', { type: 'button', class: 'secondary', id: `review-export-${f}` }, f.toUpperCase());
    b.addEventListener('click', async () => {
      b.disabled = true;
      try {
        const name = await download('/api/v1/review/export', { period: r.period, format: f, lang: getLang() });
        ctx.say(t('inv.downloaded', { file: name }));
      } catch (e) {
        ctx.say(errorText(e));
      } finally {
        b.disabled = false;
      }
    });
    return b;
  };
  view.replaceChildren(
    h('div', { class: 'page-head' }, h('h1', {}, t('rev.title', { period: r.period }))),
    h('div', { class: 'controls' }, h('label', { for: 'review-period' }, t('rev.month')), picker, show),
    h('p', { class: 'muted' }, t('rev.help')),
    table(t('rev.title', { period: r.period }), cols, rows, { id: 'review-table' }),
    h('p', { id: 'review-savings' }, t('usage.savings', { range: r.period, cost: money(r.total.saved_cost, cur), hours: hours(r.total.saved_seconds) }),
      ' ', h('span', { class: 'muted' }, t('usage.savingsAssumption', { days: Math.round((r.savings_horizon_seconds || 0) / 86400) }))),
    h('p', { class: 'actions' }, t('rev.export'), ' ', exportBtn('pdf'), ' ', exportBtn('xlsx'), ' ', exportBtn('csv')),
    h('h2', {}, t('rev.advice', { from: r.advice_from || '—', to: r.period })),
    h('p', { class: 'muted' }, zh ? r.advice_assumption?.['zh-CN'] : r.advice_assumption?.en),
    ...(advice.length ? advice : [h('p', {}, t('rev.noAdvice'))]));
}

export const reviewPages = { review: reviewPage };
