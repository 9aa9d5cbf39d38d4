package invoicing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/cardhour/cardhour/billing/export"
	"github.com/cardhour/cardhour/internal/ledger"
)

// Finalize numbers draft id and freezes its document, with the number and
// issue date stamped into it. It is refused until the period's grace
// period has ended (ErrGracePeriod, naming when it does), and when
// ifSHA256 is set and the draft is no longer that document (a billing run
// replaced it since it was reviewed: ledger.ErrConflict).
func (s *Service) Finalize(ctx context.Context, actor string, id int64, ifSHA256 string) (ledger.Invoice, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return ledger.Invoice{}, err
	}
	inv, err := s.cfg.Ledger.Invoice(ctx, id)
	if err != nil {
		return ledger.Invoice{}, err
	}
	if inv.Status != ledger.StatusDraft {
		return ledger.Invoice{}, fmt.Errorf("%w: cannot finalize invoice %d: it is %s, want draft", ledger.ErrInvalidTransition, id, inv.Status)
	}
	if err := s.checkGrace(ctx, inv); err != nil {
		return ledger.Invoice{}, err
	}
	if s.cfg.LeadApproval && ifSHA256 == "" {
		ifSHA256 = inv.SHA256 // only the document that was approved
	}
	if err := s.checkApproval(ctx, inv, ifSHA256); err != nil {
		return ledger.Invoice{}, err
	}
	return s.cfg.Ledger.Finalize(ctx, actor, id, ledger.FinalizeOptions{IfSHA256: ifSHA256,
		Stamp: func(number string, doc []byte) ([]byte, error) {
			// A reissue draft opened by a void before reissues were
			// unstamped still carries the voided number and issue date:
			// it is stamped afresh, never refused.
			doc, err := s.cfg.Documents.Reissue(doc)
			if err != nil {
				return nil, err
			}
			return s.cfg.Documents.Stamp(doc, number, s.now().UTC())
		}})
}

// checkGrace refuses inv while its period's grace period runs (the period
// in the time zone of the catalog the draft was priced with).
func (s *Service) checkGrace(ctx context.Context, inv ledger.Invoice) error {
	cat, err := s.catalog(ctx, inv.CatalogVersion)
	if err != nil {
		return err
	}
	p, err := period(inv.Period, cat)
	if err != nil {
		return err
	}
	if opens := s.GraceEnds(p); s.now().Before(opens) {
		return fmt.Errorf("%w: %w: invoice %d (%s %s) may be finalized from %s (%s after the period ends, %s)",
			ErrGracePeriod, ledger.ErrInvalidTransition, inv.ID, inv.Project, inv.Period,
			opens.In(cat.Location).Format(time.RFC3339), s.cfg.Grace, cat.Timezone)
	}
	return nil
}

// Void voids finalized invoice id: a credit note cancels it (a document:
// the invoice's lines negated, its own number, stored with its SHA-256) and
// the next revision opens as a draft that starts from the voided document
// without its number and issue date, so that finalizing it gives it the
// next number. The ledger does all of it in one transaction; the voided
// invoice's stored document keeps its bytes.
func (s *Service) Void(ctx context.Context, actor string, id int64, reason string) (ledger.Voided, error) {
	return s.cfg.Ledger.Void(ctx, actor, id, reason, ledger.VoidOptions{
		Reissue: s.cfg.Documents.Reissue,
		CreditNote: func(number string, at time.Time, voided []byte) ([]byte, error) {
			return s.cfg.Documents.CreditNote(voided, number, at)
		},
	})
}

// CreditNote returns credit note id with its document. A credit note issued
// before credit notes had documents (ledger migration 4) gets the one it
// would have had, derived from the voided invoice's stored document and the
// credit note's number and time (the same bytes on every call; its SHA256
// stays empty: the ledger never stored it).
func (s *Service) CreditNote(ctx context.Context, id int64) (ledger.CreditNote, error) {
	cn, err := s.cfg.Ledger.CreditNote(ctx, id)
	if err != nil || cn.Document != nil {
		return cn, err
	}
	inv, err := s.cfg.Ledger.Invoice(ctx, cn.InvoiceID)
	if err != nil {
		return cn, err
	}
	if cn.Document, err = s.cfg.Documents.CreditNote(inv.Document, cn.Number, cn.CreatedAt); err != nil {
		return cn, fmt.Errorf("credit note %s: %w", cn.Number, err)
	}
	return cn, nil
}

// VoidMark is what the exports of voided invoice inv say of its voiding:
// its latest credit note, when and why it was voided.
func (s *Service) VoidMark(ctx context.Context, inv ledger.Invoice) (export.VoidMark, error) {
	if inv.Status != ledger.StatusVoid {
		return export.VoidMark{}, fmt.Errorf("%w: invoice %d is %s, not void", ledger.ErrInvalidTransition, inv.ID, inv.Status)
	}
	cns, err := s.cfg.Ledger.CreditNotes(ctx, inv.ID)
	if err != nil {
		return export.VoidMark{}, err
	}
	return VoidMarkOf(inv, cns), nil
}

// RenderInvoice writes invoice inv's export in format f from its stored
// document: a voided invoice's with its void mark (已作废 / VOID and the
// credit note's number), a draft's marked by the renderers themselves.
func (s *Service) RenderInvoice(ctx context.Context, w io.Writer, f Format, inv ledger.Invoice) error {
	if inv.Status != ledger.StatusVoid {
		return s.cfg.Documents.Render(w, f, inv.Document)
	}
	m, err := s.VoidMark(ctx, inv)
	if err != nil {
		return err
	}
	return s.cfg.Documents.RenderVoided(w, f, inv.Document, m)
}

// AutoFinalizeActor is the actor automatic finalization records.
const AutoFinalizeActor = "auto-finalize"

// AutoFinalize finalizes the open drafts of every period whose grace
// period has ended: it first bills the period again (so that what is
// finalized saw every late sample the grace period let in), then
// finalizes each draft exactly as that run saved it. An invoice finalized
// meanwhile by someone else is skipped. It returns the invoices it
// finalized.
func (s *Service) AutoFinalize(ctx context.Context) ([]ledger.Invoice, error) {
	drafts, err := s.invoices(ctx, ledger.InvoiceFilter{Status: ledger.StatusDraft})
	if err != nil {
		return nil, err
	}
	var periods []string
	for _, d := range drafts {
		if err := s.checkGrace(ctx, d); err == nil {
			periods = append(periods, d.Period)
		} else if !errors.Is(err, ErrGracePeriod) {
			return nil, err
		}
	}
	slices.Sort(periods)
	periods = slices.Compact(periods)
	var out []ledger.Invoice
	var errs []error
	for _, per := range periods {
		run, err := s.Run(ctx, AutoFinalizeActor, per)
		if err != nil {
			errs = append(errs, fmt.Errorf("automatic finalization of %s: %w", per, err))
			continue
		}
		for _, d := range run.Drafts {
			inv, err := s.Finalize(ctx, AutoFinalizeActor, d.InvoiceID, d.SHA256)
			switch {
			case err == nil:
				out = append(out, inv)
				s.log.Info("invoice finalized automatically", "invoice", inv.ID, "number", inv.Number, "project", inv.Project, "period", inv.Period)
			case isAwaitingApproval(err):
				s.log.Info("invoice awaits its lead's approval: not finalized automatically", "invoice", d.InvoiceID, "project", d.Project, "period", per)
			case errors.Is(err, ledger.ErrInvalidTransition) || errors.Is(err, ledger.ErrConflict):
				// Finalized (or replaced) by another replica or a person meanwhile.
			default:
				errs = append(errs, fmt.Errorf("automatic finalization of invoice %d (%s %s): %w", d.InvoiceID, d.Project, per, err))
			}
		}
	}
	return out, errors.Join(errs...)
}

// Lease names of the loops: one replica at a time runs each.
const (
	LeaseAutoFinalize = "invoicing.auto-finalize"
	LeaseExport       = "invoicing.export"
)

// AutoFinalizeLoop runs AutoFinalize every interval while holder leads
// (ledger lease LeaseAutoFinalize), until ctx ends; then it gives the
// lease up and returns ctx's error, joined with the release's if that
// failed.
func (s *Service) AutoFinalizeLoop(ctx context.Context, holder string, every time.Duration) error {
	return s.leaderLoop(ctx, LeaseAutoFinalize, holder, every, func(ctx context.Context) error {
		_, err := s.AutoFinalize(ctx)
		return err
	})
}

// leaderLoop calls step every interval (and once at the start) while
// holder holds lease name. When ctx ends it gives the lease up and returns
// ctx's error joined with the release's: a lease that could not be given
// up holds the other replicas off until it expires, which the caller must
// hear of.
func (s *Service) leaderLoop(ctx context.Context, name, holder string, every time.Duration, step func(context.Context) error) (err error) {
	if every <= 0 {
		return fmt.Errorf("%w: %s loop: interval %s: want a positive duration", ledger.ErrInvalidArgument, name, every)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if rerr := s.cfg.Ledger.ReleaseLease(rctx, name, holder); rerr != nil {
			err = errors.Join(err, fmt.Errorf("%s loop: cannot give the lease up: %w", name, rerr))
		}
	}()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if lead, err := s.cfg.Ledger.AcquireLease(ctx, name, holder, 3*every); err != nil {
			s.log.Warn("cannot acquire lease", "lease", name, "holder", holder, "err", err)
		} else if lead {
			if err := step(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("loop step failed", "lease", name, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
