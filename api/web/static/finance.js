// A month's invoices for finance: the summary by funding source (the
// server adds the documents' totals: GET /api/v1/periods/{p}/summary) and
// finalizing several drafts at once, each with the SHA-256 of the draft
// shown (POST /api/v1/periods/{p}/finalize).

import { ApiError, get, post } from './api.js';
import { errorText, h, money, table } from './format.js';
import { t } from './i18n.js';

const FINANCE = ['admin', 'finance'];

// told is what the last batch did, shown by the page drawn after it.
let told = null;

// periodFinance reads the period's summary and returns what the invoice
// list adds: the funding code, total and currency of an invoice (as its
// stored document states them), a column of checkboxes for the drafts
// (finance only), and the sections below the list.
export async function periodFinance(ctx, period) {
  const { session } = ctx;
  const sum = await get(`/api/v1/periods/${period}/summary`);
  const byID = new Map(sum.invoices.map((i) => [i.id, i]));
  const finance = FINANCE.includes(session.me.role);
  const fundingOf = (i) => byID.get(i.id)?.funding || '—';
  const select = finance ? {
    label: h('span', { class: 'vh' }, t('fin.select')),
    value: (i) => (i.status === 'draft' && byID.has(i.id)
      ? h('input', { type: 'checkbox', 'data-finalize': i.id, 'aria-label': t('fin.selectLabel', { project: i.project, revision: i.revision }) })
      : ''),
  } : null;
  const fund = (f) => f.funding || t('fin.noFunding');
  const sections = [h('section', { class: 'card', id: 'funding-summary' }, h('h2', {}, t('fin.title', { period })),
    h('p', { class: 'muted' }, t('fin.help')),
    table(t('fin.title', { period }), [
      { label: t('inv.funding'), value: (f) => (f.total_row ? h('strong', {}, t('fin.periodTotal')) : fund(f)) },
      { label: t('fin.drafts'), num: true, value: (f) => `${f.drafts} · ${money(f.draft_total, f.currency)}` },
      { label: t('fin.finalized'), num: true, value: (f) => `${f.finalized} · ${money(f.finalized_total, f.currency)}` },
      { label: t('inv.total'), num: true, value: (f) => (f.total_row ? h('strong', {}, money(f.total, f.currency)) : money(f.total, f.currency)) },
    ], [...sum.by_funding, ...sum.totals.map((x) => ({ ...x, total_row: true }))], { id: 'funding-table' }))];
  if (finance && (sum.invoices.some((i) => i.status === 'draft') || told?.period === period)) sections.push(batchForm(ctx, period, byID));
  const totalOf = (i) => byID.get(i.id)?.total ?? '0';
  const currencyOf = (i) => byID.get(i.id)?.currency;
  return { fundingOf, totalOf, currencyOf, select, sections };
}

function batchForm(ctx, period, byID) {
  const btn = h('button', { type: 'button', id: 'finalize-selected' }, t('fin.finalizeSelected'));
  const out = h('div', { id: 'finalize-results', role: 'status' });
  if (told?.period === period) {
    out.append(h('p', {}, h('strong', {}, told.summary)),
      h('ul', {}, told.results.map((r) => h('li', { 'data-id': r.id, 'data-result': r.ok ? 'ok' : 'refused' }, r.text))));
    told = null;
  }
  btn.addEventListener('click', async () => {
    const chosen = [...document.querySelectorAll('[data-finalize]:checked')].map((c) => byID.get(Number(c.dataset.finalize)));
    if (chosen.length === 0) { out.textContent = t('fin.noneSelected'); return; }
    const list = chosen.map((i) => `${i.project} r${i.revision}: ${money(i.total, i.currency)}`).join('\n');
    if (!confirm(t('fin.confirm', { n: chosen.length, period, list }))) return;
    btn.disabled = true;
    try {
      const res = await post(`/api/v1/periods/${period}/finalize`, { items: chosen.map((i) => ({ id: i.id, if_sha256: i.sha256 })) });
      told = { period, summary: t('fin.summary', { finalized: res.finalized, refused: res.refused }), results: res.results.map((r) => {
        const i = byID.get(r.id);
        return { id: r.id, ok: r.ok, text: r.ok ? t('fin.done', { project: i.project, number: r.invoice.number })
          : t('fin.refused', { project: i.project, why: errorText(new ApiError(r.problem.status, r.problem, '')) }) };
      }) };
      ctx.go('invoices', { period, at: Date.now() });
    } catch (ex) {
      out.textContent = errorText(ex);
      btn.disabled = false;
    }
  });
  return h('section', { class: 'card', id: 'batch-finalize' }, h('h2', {}, t('fin.batchTitle')), h('p', { class: 'muted' }, t('fin.batchHelp')), btn, out);
}

// approveControl is the lead's sign-off of a draft (serve --lead-approval):
// an Approve button for the project's lead (and admin) while this very
// document is not approved; a confirmation names the total.
export function approveControl(ctx, inv, total) {
  const role = ctx.session.me.role;
  if (inv.status !== 'draft' || !inv.approval_required || inv.approved_by || !['admin', 'lead'].includes(role)) return [];
  const b = h('button', { type: 'button', id: 'approve' }, t('inv.approve'));
  b.addEventListener('click', async () => {
    if (!confirm(t('inv.approveConfirm', { project: inv.project, period: inv.period, total }))) return;
    b.disabled = true;
    try {
      await post(`/api/v1/invoices/${inv.id}/approve`, { if_sha256: inv.sha256 });
      ctx.say(t('inv.approvedOk', { project: inv.project, period: inv.period }));
      ctx.go('invoices', { at: Date.now() }, [String(inv.id)]);
    } catch (e) {
      ctx.say(errorText(e));
      b.disabled = false;
    }
  });
  return [b];
}
