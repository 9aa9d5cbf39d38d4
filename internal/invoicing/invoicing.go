// Package invoicing is the invoice flow the API calls: billing runs that
// save a draft per project with a data-quality section and the difference
// from finalized revisions, finalization after a grace period (by hand or
// automatically by one leader), voids, per-student statements, the roster
// import, and the export of a finalized period to a directory and a
// finance webhook, each exactly once.
//
// Usage comes from the usage store (reads.UsageSource), everything
// decided from the ledger (internal/ledger), and documents are built,
// stamped and rendered by Documents (billing/export).
package invoicing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/shopspring/decimal"

	"github.com/cardhour/cardhour/billing"
	"github.com/cardhour/cardhour/internal/catalogs"
	"github.com/cardhour/cardhour/internal/ledger"
	"github.com/cardhour/cardhour/internal/reads"
	"github.com/cardhour/cardhour/schemas"
)

// DefaultGrace is how long after a period's end its invoices stay open for
// late samples before they may be finalized.
const DefaultGrace = 72 * time.Hour

// Errors; test them with errors.Is.
var (
	// ErrGracePeriod: the period's grace period has not ended; the error
	// names the time it does. It also wraps ledger.ErrInvalidTransition.
	ErrGracePeriod = errors.New("grace period not over")
	// ErrFuturePeriod: a billing run of a month that has not begun. It
	// also wraps ledger.ErrInvalidArgument.
	ErrFuturePeriod = errors.New("period has not begun")
	// ErrNotFinalized: a period cannot be exported while one of its
	// invoices is a draft. It also wraps ledger.ErrInvalidTransition.
	ErrNotFinalized = errors.New("period not finalized")
)

// QualityFunc checks the data quality of period p under cat as of now
// (rejected samples, silent nodes, busy usage with no holder); its value is
// reported as JSON in the run.
type QualityFunc func(ctx context.Context, cat *schemas.Catalog, p billing.Period, now time.Time) (*reads.DataQuality, error)

// Config configures a Service.
type Config struct {
	Ledger    Ledger            // required
	Usage     reads.UsageSource // required: the usage store
	Documents Documents         // the invoice document; nil: ExportDocuments{}
	// Quality, when set (by default reads.CheckDataQuality when Usage
	// implements reads.QualityRows), adds the usage store's data-quality checks to
	// every run (unpriced usage is reported from the bill itself).
	Quality QualityFunc
	Clock   func() time.Time // nil: time.Now
	// Grace is how long after a period's end (in the catalog's time zone)
	// finalizing is refused; 0: DefaultGrace.
	Grace time.Duration
	// ExportDir is where the export job writes finalized periods ("": the
	// job writes no files).
	ExportDir string
	// Webhook, when its URL is set, receives every exported period once.
	Webhook Webhook
	Logger  *slog.Logger // nil: discard
	// LeadApproval: a draft is finalized only once its project's lead has
	// approved that very document (Approve); a draft recomputed since is
	// approved again.
	LeadApproval bool
	// Catalogs parses the ledger's catalog versions (nil: a cache of this
	// Service's own over Ledger); serve shares one with the API.
	Catalogs *catalogs.Cache
}

// Service is the invoice flow. It is safe for concurrent use, also by
// several replicas over one ledger.
type Service struct {
	cfg  Config
	now  func() time.Time
	log  *slog.Logger
	cats *catalogs.Cache
}

// New checks cfg and returns the Service.
func New(cfg Config) (*Service, error) {
	var errs []error
	if cfg.Ledger == nil {
		errs = append(errs, errors.New("invoicing: a ledger is required"))
	}
	if cfg.Usage == nil {
		errs = append(errs, errors.New("invoicing: a usage source is required"))
	}
	if cfg.Documents == nil {
		cfg.Documents = ExportDocuments{}
	}
	if q, ok := cfg.Usage.(reads.QualityRows); ok && cfg.Quality == nil {
		cfg.Quality = func(ctx context.Context, cat *schemas.Catalog, p billing.Period, now time.Time) (*reads.DataQuality, error) {
			return reads.CheckDataQuality(ctx, q, cat, p, now)
		}
	}
	if cfg.Grace < 0 {
		errs = append(errs, fmt.Errorf("invoicing: grace %s: want 0 (default %s) or more", cfg.Grace, DefaultGrace))
	}
	if err := cfg.Webhook.check(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.Grace == 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Catalogs == nil {
		cfg.Catalogs = catalogs.New(cfg.Ledger)
	}
	return &Service{cfg: cfg, now: cfg.Clock, log: cfg.Logger, cats: cfg.Catalogs}, nil
}

// catalog is a stored catalog version, parsed (once per process when the
// catalog cache is shared).
func (s *Service) catalog(ctx context.Context, version int64) (*schemas.Catalog, error) {
	return s.cats.Version(ctx, version)
}

// currentCatalog is the current catalog version, parsed.
func (s *Service) currentCatalog(ctx context.Context) (int64, *schemas.Catalog, error) {
	v, err := s.cfg.Ledger.CurrentCatalog(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("cannot bill without a catalog: %w", err)
	}
	c, err := s.cats.Parse(v)
	if err != nil {
		return 0, nil, err
	}
	return v.Version, c, nil
}

// GraceEnds is when period p's invoices may be finalized.
func (s *Service) GraceEnds(p billing.Period) time.Time { return p.End.Add(s.cfg.Grace) }

// RunReport is what a billing run did. The API serves it as it is (its
// schema is this type's), and the ledger stores it with the run.
type RunReport struct {
	ID             int64     `json:"id"` // the billing run's record in the ledger
	Period         string    `json:"period"`
	MonthToDate    bool      `json:"month_to_date"` // the period had not ended
	CatalogVersion int64     `json:"catalog_version"`
	DataCutoff     time.Time `json:"data_cutoff"`
	GeneratedAt    time.Time `json:"generated_at"`
	// Drafts are the drafts saved (created, replaced or unchanged).
	Drafts []RunDraft `json:"drafts"`
	// Kept are the finalized revisions the run did not replace (a
	// finalized invoice is never replaced; see Diffs).
	Kept []RunKept `json:"kept"`
	// Unpriced is usage no SKU prices (reported, never billed at zero).
	Unpriced []RunUnpriced `json:"unpriced"`
	// Warnings are the bill's warnings (conflicts, projects not in the
	// catalog, unpriced usage), as text.
	Warnings []string `json:"warnings"`
	// DataQuality is the usage store's data-quality report (absent
	// without Config.Quality).
	DataQuality *reads.DataQuality `json:"data_quality,omitempty"`
	// Diffs compare each finalized revision of the period with what this
	// run recomputed; only projects with a difference are listed.
	Diffs []RunDiff `json:"diffs"`
}

// RunDraft is one draft a run saved.
type RunDraft struct {
	Project   string        `json:"project"`
	InvoiceID int64         `json:"invoice_id"`
	Revision  int           `json:"revision"`
	SHA256    string        `json:"sha256"`
	Total     billing.Money `json:"total"`
	// Outcome is what the run did with the project's draft.
	Outcome Outcome `json:"outcome" enum:"created,updated,unchanged" doc:"created (no open draft), updated (the open draft replaced) or unchanged (the open draft kept with its SHA-256: its content is what the run computed, apart from generated_at and data_cutoff)"`
}

// Outcome is what a run did with a project's draft. A recomputed document
// whose content is the stored draft's (it differs at most in generated_at
// and data_cutoff, see export.SameContent) leaves the stored draft, its
// SHA-256 and its data cut-off as they are: unchanged, so that a reviewed
// if_sha256 stays valid.
type Outcome string

// The outcomes, listed once in Outcomes (the API's enum is tested against
// it).
const (
	OutcomeCreated   Outcome = "created"   // the project had no open draft
	OutcomeUpdated   Outcome = "updated"   // the open draft was replaced
	OutcomeUnchanged Outcome = "unchanged" // the open draft was kept
)

// Outcomes is every Outcome, in the order the API documents them.
var Outcomes = []Outcome{OutcomeCreated, OutcomeUpdated, OutcomeUnchanged}

// RunKept is a finalized invoice a run left as it is.
type RunKept struct {
	Project   string `json:"project"`
	InvoiceID int64  `json:"invoice_id"`
	Number    string `json:"number"`
	Revision  int    `json:"revision"`
	SHA256    string `json:"sha256"`
}

// RunUnpriced is unpriced usage of one project, user and kind.
type RunUnpriced struct {
	Project     string `json:"project"`
	User        string `json:"user"`
	GPUModel    string `json:"gpu_model"`
	Profile     string `json:"profile"`
	UsedSeconds int64  `json:"used_seconds"`
}

// Action is what a difference calls for (see docs/billing.md, late usage).
type Action string

// The actions, listed once in Actions.
const (
	ActionVoidAndReissue Action = "void_and_reissue"
)

// Actions is every Action.
var Actions = []Action{ActionVoidAndReissue}

// RunDiff is the difference between a finalized invoice and the recomputed
// document of its project and period. The finalized invoice is never
// changed by it: Action says what finance should do.
type RunDiff struct {
	Project   string        `json:"project"`
	InvoiceID int64         `json:"invoice_id"`
	Number    string        `json:"number"`
	Revision  int           `json:"revision"`
	OldTotal  billing.Money `json:"old_total"`
	NewTotal  billing.Money `json:"new_total"`
	Delta     billing.Money `json:"delta"`
	Lines     []RunDiffLine `json:"lines"`
	Action    Action        `json:"action"`
}

// RunDiffLine is one line (kind, user, SKU) whose amount differs.
type RunDiffLine struct {
	Kind  string        `json:"kind"`
	User  string        `json:"user"`
	SKU   string        `json:"sku"`
	Old   billing.Money `json:"old"`
	New   billing.Money `json:"new"`
	Delta billing.Money `json:"delta"`
}

// period parses a "YYYY-MM" in the catalog's time zone.
func period(s string, cat *schemas.Catalog) (billing.Period, error) {
	p, err := billing.ParsePeriod(s, cat.Location)
	if err != nil {
		return p, fmt.Errorf("%w: %w", ledger.ErrInvalidArgument, err)
	}
	return p, nil
}

// Run bills period ("YYYY-MM"; the current month bills month to date) with
// the current catalog from the usage store, saves a draft per project (a
// finalized revision is kept and reported with its difference instead),
// records the run in the ledger and returns it.
func (s *Service) Run(ctx context.Context, actor, periodStr string) (*RunReport, error) {
	if err := ledger.CheckActor(actor); err != nil {
		return nil, err
	}
	version, cat, err := s.currentCatalog(ctx)
	if err != nil {
		return nil, err
	}
	p, err := period(periodStr, cat)
	if err != nil {
		return nil, err
	}
	now := s.now()
	if now.Before(p.Start) {
		return nil, fmt.Errorf("%w: %w: %s begins %s (%s); bill it from then on",
			ErrFuturePeriod, ledger.ErrInvalidArgument, p, p.Start.Format(time.RFC3339), cat.Timezone)
	}
	res, err := reads.BillFrom(ctx, s.cfg.Usage, cat, p)
	if err != nil {
		return nil, fmt.Errorf("billing %s: %w", p, err)
	}
	if err := s.releaseWarnings(ctx, res, cat, p); err != nil {
		return nil, err
	}
	run := newRun(res, p, version, now)
	if s.cfg.Quality != nil {
		if run.DataQuality, err = s.cfg.Quality(ctx, cat, p, now); err != nil {
			return nil, fmt.Errorf("data quality of %s: %w", p, err)
		}
	}
	built, conflicted, err := s.saveDrafts(ctx, actor, run, res)
	if err != nil {
		return nil, err
	}
	if err := s.keepFinalized(ctx, run, built, conflicted); err != nil {
		return nil, err
	}
	report, err := json.Marshal(run)
	if err != nil {
		return nil, err
	}
	rec, err := s.cfg.Ledger.SaveBillingRun(ctx, actor, ledger.BillingRun{Period: run.Period, CatalogVersion: version,
		DataCutoff: run.DataCutoff, Report: report})
	if err != nil {
		return nil, err
	}
	run.ID = rec.ID
	return run, nil
}

// newRun is the report of billing p at now, before any draft is saved: its
// data cut-off (the period's end, now, or the newest session, whichever is
// first) and the unpriced usage.
func newRun(res *billing.Result, p billing.Period, version int64, now time.Time) *RunReport {
	cutoff := now
	if cutoff.After(p.End) {
		cutoff = p.End
	}
	if newest := newestSession(res); !newest.IsZero() && newest.Before(cutoff) {
		cutoff = newest
	}
	run := &RunReport{Period: p.String(), MonthToDate: now.Before(p.End), CatalogVersion: version,
		DataCutoff: cutoff.UTC(), GeneratedAt: now.UTC(), Warnings: res.Warnings,
		Drafts: []RunDraft{}, Kept: []RunKept{}, Unpriced: []RunUnpriced{}, Diffs: []RunDiff{}}
	for _, inv := range res.Invoices {
		for _, u := range inv.Unpriced {
			run.Unpriced = append(run.Unpriced, RunUnpriced{Project: inv.Project, User: u.User, GPUModel: u.GPUModel,
				Profile: u.Profile, UsedSeconds: u.UsedMS / 1000})
		}
	}
	return run
}

// saveDrafts builds each project's document and saves it as the project's
// draft, adding it to run.Drafts. It returns every built document by
// project, and the projects whose draft the ledger refused as a conflict
// (a finalized revision, which keepFinalized checks).
func (s *Service) saveDrafts(ctx context.Context, actor string, run *RunReport, res *billing.Result) (built map[string][]byte, conflicted map[string]error, _ error) {
	names, err := s.rosterNames(ctx)
	if err != nil {
		return nil, nil, err
	}
	docs, err := s.cfg.Documents.Build(res, Meta{CatalogVersion: run.CatalogVersion, DataCutoff: run.DataCutoff, GeneratedAt: run.GeneratedAt}, names)
	if err != nil {
		return nil, nil, fmt.Errorf("building the documents of %s: %w", run.Period, err)
	}
	open, err := s.invoices(ctx, ledger.InvoiceFilter{Period: run.Period, Status: ledger.StatusDraft})
	if err != nil {
		return nil, nil, err
	}
	openDraft := map[string]int64{}
	for _, o := range open {
		openDraft[o.Project] = o.ID
	}
	built = map[string][]byte{}
	conflicted = map[string]error{}
	for _, d := range docs {
		built[d.Project] = d.Document
		inv, outcome, err := s.saveDraft(ctx, actor, run, d, openDraft)
		switch {
		case err == nil:
			sum, err := s.cfg.Documents.Summary(inv.Document)
			if err != nil {
				return nil, nil, fmt.Errorf("reading back the draft of %s/%s: %w", d.Project, run.Period, err)
			}
			run.Drafts = append(run.Drafts, RunDraft{Project: d.Project, InvoiceID: inv.ID, Revision: inv.Revision, SHA256: inv.SHA256,
				Total: billing.Money{Decimal: sum.Total}, Outcome: outcome})
		case errors.Is(err, ledger.ErrConflict):
			// A finalized revision: kept, and compared below.
			conflicted[d.Project] = err
		default:
			return nil, nil, err
		}
	}
	return built, conflicted, nil
}

// saveDraft saves d as its project's draft, or keeps the open draft when its
// content is d's and it was built from the same catalog version.
func (s *Service) saveDraft(ctx context.Context, actor string, run *RunReport, d ProjectDocument, openDraft map[string]int64) (ledger.Invoice, Outcome, error) {
	outcome := OutcomeCreated
	if id, ok := openDraft[d.Project]; ok {
		outcome = OutcomeUpdated
		cur, err := s.cfg.Ledger.Invoice(ctx, id)
		if err != nil {
			return ledger.Invoice{}, "", err
		}
		same, err := s.cfg.Documents.SameContent(cur.Document, d.Document)
		if err != nil { // a stored draft that does not parse is replaced
			s.log.Warn("stored draft does not parse; replacing it", "invoice", id, "err", err)
		}
		if same && cur.Status == ledger.StatusDraft && cur.CatalogVersion == run.CatalogVersion {
			return cur, OutcomeUnchanged, nil
		}
	}
	inv, err := s.cfg.Ledger.SaveDraft(ctx, actor, ledger.Draft{Project: d.Project, Period: run.Period, Document: d.Document,
		CatalogVersion: run.CatalogVersion, DataCutoff: run.DataCutoff})
	return inv, outcome, err
}

// keepFinalized adds every finalized revision of the period (also of
// projects the run found no usage for) to run.Kept, comparing it with the
// recomputation. A conflict that is not a finalized revision is an error.
func (s *Service) keepFinalized(ctx context.Context, run *RunReport, built map[string][]byte, conflicted map[string]error) error {
	finalized, err := s.invoices(ctx, ledger.InvoiceFilter{Period: run.Period, Status: ledger.StatusFinalized})
	if err != nil {
		return err
	}
	for _, f := range finalized {
		delete(conflicted, f.Project)
	}
	if len(conflicted) > 0 { // a conflict that is not a finalized revision
		var errs []error
		for p, err := range conflicted {
			errs = append(errs, fmt.Errorf("saving the draft of %s/%s: %w", p, run.Period, err))
		}
		return errors.Join(errs...)
	}
	for _, f := range finalized {
		run.Kept = append(run.Kept, RunKept{Project: f.Project, InvoiceID: f.ID, Number: f.Number, Revision: f.Revision, SHA256: f.SHA256})
		full, err := s.cfg.Ledger.Invoice(ctx, f.ID)
		if err != nil {
			return err
		}
		d, err := s.diff(full, built[f.Project])
		if err != nil {
			return err
		}
		if d != nil {
			run.Diffs = append(run.Diffs, *d)
		}
	}
	return nil
}

// rosterNames is every project's roster: project → user → name.
func (s *Service) rosterNames(ctx context.Context) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	f := ledger.StudentFilter{Limit: ledger.MaxLimit}
	for {
		page, next, err := s.cfg.Ledger.Students(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, st := range page {
			if out[st.Project] == nil {
				out[st.Project] = map[string]string{}
			}
			out[st.Project][st.User] = st.Name
		}
		if next == "" {
			return out, nil
		}
		f.Cursor = next
	}
}

// newestSession is the end of the newest session billed, zero when none.
func newestSession(res *billing.Result) time.Time {
	var ms int64
	for i := range res.Invoices {
		for _, s := range res.Invoices[i].Sessions {
			ms = max(ms, s.End)
		}
	}
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// invoices lists every invoice matching f (all pages).
func (s *Service) invoices(ctx context.Context, f ledger.InvoiceFilter) ([]ledger.Invoice, error) {
	var out []ledger.Invoice
	f.Limit = ledger.MaxLimit
	for {
		page, next, err := s.cfg.Ledger.Invoices(ctx, f)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if next == "" {
			return out, nil
		}
		f.Cursor = next
	}
}

type lineKey struct{ kind, user, sku string }

// diff compares a finalized invoice with the recomputed document of its
// project (nil: no usage now); nil when they agree line by line.
func (s *Service) diff(inv ledger.Invoice, recomputed []byte) (*RunDiff, error) {
	old, err := s.cfg.Documents.Summary(inv.Document)
	if err != nil {
		return nil, fmt.Errorf("reading finalized invoice %s: %w", inv.Number, err)
	}
	var cur DocSummary
	if recomputed != nil {
		if cur, err = s.cfg.Documents.Summary(recomputed); err != nil {
			return nil, fmt.Errorf("reading the recomputed document of %s: %w", inv.Project, err)
		}
	}
	amounts := map[lineKey][2]decimal.Decimal{}
	for _, l := range old.Lines {
		k := lineKey{l.Kind, l.User, l.SKU}
		a := amounts[k]
		a[0] = a[0].Add(l.Amount)
		amounts[k] = a
	}
	for _, l := range cur.Lines {
		k := lineKey{l.Kind, l.User, l.SKU}
		a := amounts[k]
		a[1] = a[1].Add(l.Amount)
		amounts[k] = a
	}
	d := &RunDiff{Project: inv.Project, InvoiceID: inv.ID, Number: inv.Number, Revision: inv.Revision,
		OldTotal: billing.Money{Decimal: old.Total}, NewTotal: billing.Money{Decimal: cur.Total}, Delta: billing.Money{Decimal: cur.Total.Sub(old.Total)}, Lines: []RunDiffLine{}}
	for k, a := range amounts {
		if !a[0].Equal(a[1]) {
			d.Lines = append(d.Lines, RunDiffLine{Kind: k.kind, User: k.user, SKU: k.sku, Old: billing.Money{Decimal: a[0]}, New: billing.Money{Decimal: a[1]}, Delta: billing.Money{Decimal: a[1].Sub(a[0])}})
		}
	}
	if len(d.Lines) == 0 && d.Delta.IsZero() {
		return nil, nil
	}
	slices.SortFunc(d.Lines, func(x, y RunDiffLine) int {
		if c := compare(x.Kind, y.Kind); c != 0 {
			return c
		}
		if c := compare(x.User, y.User); c != 0 {
			return c
		}
		return compare(x.SKU, y.SKU)
	})
	d.Action = ActionVoidAndReissue
	return d, nil
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// releaseWarnings puts on each project's invoice the idle releases whose
// idle streak overlaps p (done or failed; pending and dry-run releases
// released nothing and are left out), and warns about every instance whose
// release failed: the usage store says it stayed held, so its idle time is
// billed (the bill follows the samples, never the intent), and the warning
// names the instance and the failure. Neither changes an amount.
func (s *Service) releaseWarnings(ctx context.Context, res *billing.Result, cat *schemas.Catalog, p billing.Period) error {
	invoices := map[string]*billing.Invoice{}
	for i := range res.Invoices {
		invoices[res.Invoices[i].Project] = &res.Invoices[i]
	}
	for _, status := range []billing.ReleaseStatus{billing.ReleaseDone, billing.ReleaseFailed} {
		cursor := ""
		for {
			page, next, err := s.cfg.Ledger.Releases(ctx, ledger.ReleaseFilter{Status: status, UpdatedSince: p.Start, Cursor: cursor, Limit: ledger.MaxLimit})
			if err != nil {
				return fmt.Errorf("%s releases of %s: %w", status, p, err)
			}
			for _, r := range page {
				if !r.StreakStart.Before(p.End) || r.UpdatedAt.Before(p.Start) {
					continue
				}
				if inv := invoices[r.Project]; inv != nil {
					rel := billing.Release{InstanceID: r.InstanceID, Node: r.Node, User: r.User, IdleSince: r.StreakStart,
						At: r.UpdatedAt, Status: r.Status, Action: r.Action}
					if r.Status == billing.ReleaseFailed {
						rel.Action, rel.Failure = "", r.LastError
					}
					inv.Releases = append(inv.Releases, rel)
				}
				if r.Status != billing.ReleaseFailed {
					continue
				}
				holder := r.Project
				if r.User != "" {
					holder += "/" + r.User
				}
				res.AddScopedWarning(billing.Warning{Code: billing.WarnReleaseFailed, Project: r.Project, Users: nonEmptyUser(r.User),
					Message: fmt.Sprintf("instance %s on %s held by %s was idle from %s and due for release, but the release failed (%s): "+
						"it stayed held, and its idle time is billed (自动释放失败，空闲时间照常计费)",
						r.InstanceID, r.Node, holder, r.StreakStart.In(cat.Location).Format("2006-01-02 15:04 -07:00"), r.LastError)})
			}
			if next == "" {
				break
			}
			cursor = next
		}
	}
	return nil
}

func nonEmptyUser(u string) []string {
	if u == "" {
		return nil
	}
	return []string{u}
}
